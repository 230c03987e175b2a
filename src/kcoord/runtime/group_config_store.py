"""Durable per-group configs: ``group-configs.json`` in a single node's data dir, or the cluster's
shared document in PostgreSQL (:mod:`kcoord.storage.documents` holds both kinds of place).

Kafka keeps a group's dynamic configs in the metadata log. kcoord has no metadata log and the
overrides are not group state (they outlive the group: a config may be set before the first
member joins and is kept when the group is deleted, as in Kafka), so they are not records of
the group coordinator's log but one small JSON document, rewritten whole. The in-memory table changes
only after the document was written, so an acknowledged alteration survives a restart. In a
cluster, every node polls the document (:mod:`kcoord.cluster.shared_state`), so the node that
coordinates a group applies an alteration made through any other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from kcoord.coordinator.consumer.group_configs import (
    GROUP_CONFIG_NAMES,
    ConfigValue,
    GroupConfigOverrides,
    stored_value,
)
from kcoord.storage.data_files import parse_document
from kcoord.storage.documents import FileDocument, StateDocument

__all__ = ["GROUP_CONFIGS_FILE", "GroupConfigStore", "group_configs_file"]

log = structlog.get_logger(__name__)

GROUP_CONFIGS_FILE = "group-configs.json"
_FORMAT_VERSION = 1

Groups = dict[str, dict[str, ConfigValue]]


def group_configs_file(data_dir: Path) -> FileDocument:
    """A single node's group configs document."""
    return FileDocument(data_dir / GROUP_CONFIGS_FILE)


def _decode(document: Any, location: str) -> Groups:
    return {} if document is None else parse_document(location, _parse, document)


def _parse(document: Any) -> Groups:
    if document.get("version") != _FORMAT_VERSION:
        raise ValueError(f"unknown group configs format {document.get('version')!r}")
    return {
        str(group): {
            name: stored_value(name, value) for name, value in configs.items() if name in GROUP_CONFIG_NAMES
        }
        for group, configs in document["groups"].items()
    }


def _encode(groups: Mapping[str, Mapping[str, ConfigValue]]) -> dict[str, Any]:
    return {"version": _FORMAT_VERSION, "groups": {g: dict(c) for g, c in sorted(groups.items())}}


class GroupConfigStore:
    """The overrides every shard's consumer group manager reads, and the document they live in."""

    def __init__(self, document: StateDocument) -> None:
        self._document = document
        self.overrides = GroupConfigOverrides()
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the document (at start, and on every poll in a cluster) when it changed."""
        async with self._lock:
            changed, document = await self._document.read_if_changed()
            if changed:
                self._install(_decode(document, self._document.location))

    async def refresh(self) -> None:
        """The poller's step: take another node's alterations."""
        before = dict(self.overrides.by_group)
        await self.load()
        if self.overrides.by_group != before:
            log.info("group_configs.refreshed", groups=len(self.overrides.by_group))

    async def alter(
        self, group_id: str, change: Callable[[Mapping[str, ConfigValue]], Mapping[str, ConfigValue]]
    ) -> dict[str, ConfigValue]:
        """Replace one group's overrides with ``change`` of them as stored now (in a cluster: as the
        database holds them, so another node's alteration meanwhile is kept), durably, then in
        memory; the overrides it made (none: the group is forgotten). An exception from ``change``
        leaves everything as it was."""
        location = self._document.location
        made: dict[str, ConfigValue] = {}

        def on_document(document: Any) -> Any:
            groups = _decode(document, location)
            made.update(change(groups.get(group_id, {})))
            if made:
                groups[group_id] = dict(made)
            else:
                groups.pop(group_id, None)
            return _encode(groups)

        async with self._lock:
            self._install(_decode(await self._document.update(on_document), location))
        return made

    def _install(self, groups: Groups) -> None:
        """Change the shared overrides object in place: every shard holds a reference to it."""
        self.overrides.by_group.clear()
        self.overrides.by_group.update(groups)
