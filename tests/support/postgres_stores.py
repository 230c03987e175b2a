"""Two ``postgresql://`` stores on one fresh database: two nodes of a cluster, as the storage and
cluster tests play them (fencing, the shared catalogue, producer handover). Each holds the database
shared, as cluster nodes do (a store alone holds it exclusively and would refuse the second)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kcoord.storage import LogConfig
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.hold import HoldMode
from tests.support.postgres import PostgresCluster

__all__ = ["two_nodes"]


@pytest.fixture
async def two_nodes(
    postgres_cluster: PostgresCluster,
) -> AsyncIterator[tuple[PostgresLogStore, PostgresLogStore]]:
    """Two opened stores on one new database (each loads every partition); closed afterwards."""
    url = postgres_cluster.create_database()
    stores = [
        PostgresLogStore(url, LogConfig(), retention_check_interval_ms=0, hold=HoldMode.SHARED)
        for _ in range(2)
    ]
    for store in stores:
        await store.open()
    try:
        yield stores[0], stores[1]
    finally:
        for store in stores:
            await store.close()
