"""The ACLs of a node, kept in ``acls.json`` in the data directory.

Why a file and not records in a log: ACLs are few, change rarely and are read whole at start;
one JSON document, replaced atomically (temporary file, fsync, rename, fsync of the directory)
in a worker thread, is durable, readable by an operator and never half-written. Each change
rewrites the document before it is acknowledged, so an acknowledged CreateAcls/DeleteAcls
survives a crash.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kcoord.security.acl import AclBinding, AclOperation, AclPermission, PatternType, ResourceType
from kcoord.storage.atomic_file import write_text_atomically
from kcoord.storage.data_files import read_json_document

FILE_NAME = "acls.json"
_FORMAT_VERSION = 1


class AclStore:
    """Reads and replaces the ACL document; every disk access runs off the event loop."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME

    async def load(self) -> list[AclBinding]:
        return await asyncio.to_thread(self._read)

    async def save(self, bindings: Iterable[AclBinding]) -> None:
        document = {"version": _FORMAT_VERSION, "acls": [to_json(b) for b in bindings]}
        await asyncio.to_thread(write_text_atomically, self.path, json.dumps(document, indent=1) + "\n")

    def _read(self) -> list[AclBinding]:
        return read_json_document(self.path, _parse, [])


def _parse(document: Any) -> list[AclBinding]:
    if document.get("version") != _FORMAT_VERSION:
        raise ValueError(f"unsupported ACL file version {document.get('version')!r}")
    return [from_json(item) for item in document["acls"]]


def to_json(binding: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": binding.resource_type.name,
        "resource_name": binding.resource_name,
        "pattern_type": binding.pattern_type.name,
        "principal": binding.principal,
        "host": binding.host,
        "operation": binding.operation.name,
        "permission": binding.permission.name,
    }


def from_json(item: dict[str, Any]) -> AclBinding:
    binding = AclBinding(
        ResourceType[item["resource_type"]],
        str(item["resource_name"]),
        PatternType[item["pattern_type"]],
        str(item["principal"]),
        str(item["host"]),
        AclOperation[item["operation"]],
        AclPermission[item["permission"]],
    )
    binding.validate()
    return binding
