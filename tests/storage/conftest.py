"""Fixtures for the log engines: a manual clock, a fast batch builder, and stores of each engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kcoord.storage import LogConfig, LogStore, open_store
from tests.support.postgres import PostgresCluster

from .helpers import TINY_CACHE_BYTES, BatchBuilder, ManualClock, StoreFactory, build_batch


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["memory", "file", "postgresql", "postgresql-cold"])
async def open_engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """Opens stores of the parametrised engine (file stores under tmp_path, postgresql ones in a
    fresh database of the session's cluster; ``postgresql-cold`` with a cache of
    ``TINY_CACHE_BYTES``, so reads meet evicted batches); closes them afterwards."""
    opened: list[LogStore] = []
    cache_bytes = None
    if request.param == "memory":
        url = "memory://"
    elif request.param == "file":
        url = (tmp_path / "data").as_uri()
    else:
        cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
        url = cluster.create_database()
        cache_bytes = TINY_CACHE_BYTES if request.param == "postgresql-cold" else None

    async def factory(config: LogConfig | None = None, clock: ManualClock | None = None) -> LogStore:
        store = open_store(
            url, config, clock=clock, retention_check_interval_ms=0, postgres_cache_bytes=cache_bytes
        )
        await store.open()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        await store.close()


@pytest.fixture
def make_batch() -> BatchBuilder:
    """The batch builder: ``make_batch([b"v1", b"v2"], timestamps=[...])``."""
    return build_batch
