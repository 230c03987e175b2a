"""Dynamic broker configs kept and applied: ``broker-configs.json`` in the data dir, or in a cluster
the ``broker_configs`` table every node reads (:mod:`kcoord.storage.postgres.broker_configs`).

An alteration is written first (the file replaced atomically, or the rows committed) and applied
after, so an acknowledged change survives a restart. Applying puts the values over the static
settings (:meth:`kcoord.config.Settings.apply_dynamic`) and calls the appliers with the names that
changed: the connection limits and every topic's logs take the new values at once. In a cluster,
other nodes' changes are read on every membership renewal (:meth:`refresh`), so a change reaches
every node within ``kcoord.node.lease.renew.ms``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path

import structlog

from kcoord.config import Settings
from kcoord.config.dynamic import stored_value_problem
from kcoord.storage.atomic_file import write_text_atomically
from kcoord.storage.postgres.broker_configs import SharedBrokerConfigs

__all__ = ["BROKER_CONFIGS_FILE", "DEFAULT_RESOURCE", "BrokerConfigs"]

BROKER_CONFIGS_FILE = "broker-configs.json"
DEFAULT_RESOURCE = ""
"""The BROKER resource name of the cluster-wide default."""
_FORMAT_VERSION = 1

log = structlog.get_logger(__name__)

Applier = Callable[[list[str]], None]


def _read(path: Path) -> dict[str, dict[str, str]]:
    try:
        document = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    if document.get("version") != _FORMAT_VERSION:
        raise ValueError(f"unknown broker configs format {document.get('version')!r} in {path}")
    return {
        str(resource): {str(k): str(v) for k, v in configs.items()}
        for resource, configs in document["resources"].items()
    }


def _text(resources: Mapping[str, Mapping[str, str]]) -> str:
    document = {
        "version": _FORMAT_VERSION,
        "resources": {name: dict(sorted(c.items())) for name, c in sorted(resources.items()) if c},
    }
    return json.dumps(document, indent=1)


def _applicable(resource_name: str, configs: Mapping[str, str]) -> dict[str, str]:
    """The stored configs that can be applied; the others are left out with a warning, so a bad
    row or file entry never stops a node."""
    kept = {}
    for name, value in configs.items():
        problem = stored_value_problem(name, value)
        if problem is None:
            kept[name] = value
        else:
            log.warning("broker.config_ignored", resource=resource_name, config=name, reason=problem)
    return kept


class BrokerConfigs:
    """The dynamic configs of every BROKER resource, this node's applied to its settings."""

    def __init__(self, data_dir: Path, settings: Settings, node_id: int) -> None:
        self.path = data_dir / BROKER_CONFIGS_FILE
        self._settings = settings
        self.node_id = node_id
        self._resources: dict[str, dict[str, str]] = {}
        self._shared: SharedBrokerConfigs | None = None
        self._lock = asyncio.Lock()
        self.appliers: list[Applier] = []

    def of(self, resource_name: str) -> dict[str, str]:
        return dict(self._resources.get(resource_name, {}))

    async def load(self, shared: SharedBrokerConfigs | None = None) -> None:
        """Read the configs (from the database when ``shared``) and apply this node's."""
        self._shared = shared
        resources = await shared.read() if shared is not None else await asyncio.to_thread(_read, self.path)
        self._install(resources)

    async def refresh(self) -> None:
        """A cluster node: take other nodes' changes from the database."""
        if self._shared is not None:
            self._install(await self._shared.read())

    async def put(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """Make ``configs`` the whole set of ``resource_name``'s dynamic configs: durably, then applied."""
        async with self._lock:
            resources = {name: dict(c) for name, c in self._resources.items()}
            resources[resource_name] = dict(configs)
            if self._shared is not None:
                await self._shared.replace(resource_name, configs)
            else:
                await asyncio.to_thread(write_text_atomically, self.path, _text(resources))
            self._install(resources)
        log.info("broker.configs_altered", resource=resource_name, configs=dict(configs))

    def _install(self, resources: Mapping[str, Mapping[str, str]]) -> None:
        self._resources = {name: _applicable(name, c) for name, c in resources.items() if c}
        changed = self._settings.apply_dynamic(
            self._resources.get(DEFAULT_RESOURCE, {}), self._resources.get(str(self.node_id), {})
        )
        if changed:
            for applier in self.appliers:
                applier(changed)
