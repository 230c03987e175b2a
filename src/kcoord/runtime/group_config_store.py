"""Durable per-group configs: ``group-configs.json`` in the data dir.

Kafka keeps a group's dynamic configs in the metadata log. kcoord has no metadata log and the
overrides are not group state (they outlive the group: a config may be set before the first
member joins and is kept when the group is deleted, as in Kafka), so they are not records of the
offsets log but one small JSON file, rewritten whole (:mod:`kcoord.storage.atomic_file`) in a
worker thread so a crash leaves the old or the new set. The in-memory
table changes only after the file was written, so an acknowledged alteration survives a restart.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path

from kcoord.coordinator.consumer.group_configs import GROUP_CONFIG_NAMES, GroupConfigOverrides
from kcoord.storage.atomic_file import write_text_atomically

__all__ = ["GROUP_CONFIGS_FILE", "GroupConfigStore"]

GROUP_CONFIGS_FILE = "group-configs.json"
_FORMAT_VERSION = 1


def _read(path: Path) -> dict[str, dict[str, int]]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    document = json.loads(raw)
    if document.get("version") != _FORMAT_VERSION:
        raise ValueError(f"unknown group configs format {document.get('version')!r} in {path}")
    return {
        str(group): {name: int(value) for name, value in configs.items() if name in GROUP_CONFIG_NAMES}
        for group, configs in document["groups"].items()
    }


def _write(path: Path, groups: Mapping[str, Mapping[str, int]]) -> None:
    document = {"version": _FORMAT_VERSION, "groups": {g: dict(c) for g, c in sorted(groups.items())}}
    write_text_atomically(path, json.dumps(document, indent=1))


class GroupConfigStore:
    """The overrides every shard's consumer group manager reads, and their file."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / GROUP_CONFIGS_FILE
        self.overrides = GroupConfigOverrides(_read(self.path))
        self._lock = asyncio.Lock()

    async def put(self, group_id: str, values: Mapping[str, int]) -> None:
        """Replace one group's overrides (none: forget the group), durably, then in memory."""
        async with self._lock:
            groups = dict(self.overrides.by_group)
            if values:
                groups[group_id] = dict(values)
            else:
                groups.pop(group_id, None)
            await asyncio.to_thread(_write, self.path, groups)
            self.overrides.put(group_id, values)
