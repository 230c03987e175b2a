"""The ACLs, one document: ``acls.json`` in a single node's data directory, or the cluster's shared
row in PostgreSQL (:mod:`kcoord.storage.documents` holds both kinds of place).

Why one document and not records in a log: ACLs are few, change rarely and are read whole; one
JSON document, replaced atomically, is durable, readable by an operator and never half-written.
Each change is applied to the document as it is now (in cluster mode: as the database holds it,
under its row lock, so another node's concurrent change is kept) and is durable before it is
acknowledged, so an acknowledged CreateAcls/DeleteAcls survives a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kcoord.security.acl import AclBinding, AclOperation, AclPermission, PatternType, ResourceType
from kcoord.storage.data_files import parse_document
from kcoord.storage.documents import FileDocument, StateDocument

FILE_NAME = "acls.json"
_FORMAT_VERSION = 1


def acl_file(data_dir: Path) -> FileDocument:
    """A single node's ACL document."""
    return FileDocument(data_dir / FILE_NAME)


class AclStore:
    """The ACLs as bindings, in whichever document holds them."""

    def __init__(self, document: StateDocument) -> None:
        self.document = document

    @property
    def location(self) -> str:
        return self.document.location

    async def refresh(self) -> list[AclBinding] | None:
        """The bindings when the document changed since the last read or change, else None."""
        changed, document = await self.document.read_if_changed()
        if not changed:
            return None
        return parse_document(self.location, _parse_or_empty, document)

    async def update(self, change: Callable[[list[AclBinding]], list[AclBinding]]) -> list[AclBinding]:
        """Apply ``change`` to the bindings as stored now, durably; the bindings it made."""

        def on_document(document: Any) -> Any:
            return _document(change(_parse_or_empty(document)))

        return _parse_or_empty(await self.document.update(on_document))


def _document(bindings: list[AclBinding]) -> dict[str, Any]:
    return {"version": _FORMAT_VERSION, "acls": [to_json(b) for b in bindings]}


def _parse_or_empty(document: Any) -> list[AclBinding]:
    return [] if document is None else _parse(document)


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
