"""Dynamic broker configs in a cluster: ``broker_configs`` in PostgreSQL, one row per config of a
BROKER resource (``""`` the cluster default, else a node id). The table is small (a few rows per
node), so nodes read it whole on every membership renewal."""

from __future__ import annotations

from collections.abc import Mapping

import asyncpg

from kcoord.storage.postgres.errors import storage_errors

__all__ = ["SharedBrokerConfigs"]


class SharedBrokerConfigs:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def read(self) -> dict[str, dict[str, str]]:
        """Every resource's configs: ``{resource name: {config: value}}``."""
        with storage_errors("read broker configs"):
            rows = await self._pool.fetch("SELECT resource_name, name, value FROM broker_configs")
        resources: dict[str, dict[str, str]] = {}
        for row in rows:
            resources.setdefault(row["resource_name"], {})[row["name"]] = row["value"]
        return resources

    async def replace(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """Make ``configs`` the whole set of ``resource_name``'s configs, in one transaction."""
        with storage_errors("write broker configs"):
            async with self._pool.acquire() as connection, connection.transaction():
                await connection.execute("DELETE FROM broker_configs WHERE resource_name = $1", resource_name)
                await connection.executemany(
                    "INSERT INTO broker_configs (resource_name, name, value) VALUES ($1, $2, $3)",
                    [(resource_name, name, value) for name, value in sorted(configs.items())],
                )
