"""The state documents every node of a cluster shares: one row per kind in ``shared_documents``.

Each row holds one JSON document (the ACLs, the SCRAM credentials, the group configs: the same
document a single node keeps in its data directory, see :mod:`kcoord.storage.documents`) and a
version that every change bumps in the change's own transaction. A change reads the row ``FOR
UPDATE``, so changes of one kind from any node are serialised and none is lost. Nodes poll with
:meth:`SharedDocument.read_if_changed`, one indexed row read that returns the document only when its
version moved, the model of the topic catalogue's version poll.

A missing row means "no document yet". :meth:`SharedDocument.adopt` inserts a node's file as the
first document only while there is none, so the first cluster node to start decides, once, and
what the database already holds is never overwritten.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import asyncpg

from kcoord.storage.documents import Change
from kcoord.storage.postgres.errors import storage_errors

__all__ = ["SCRAM_DECOY_KIND", "SHARED_KINDS", "SharedDocument"]

SHARED_KINDS = ("acls", "scram_credentials", "group_configs")
"""The kinds a cluster shares, in the order the composition root pairs them with a node's files."""
SCRAM_DECOY_KIND = "scram_decoy"
"""The key that makes unknown users' SCRAM salts (:mod:`kcoord.security.scram_decoy`): one per cluster."""

_ABSENT = 0
"""The version of a document that does not exist yet (stored ones start at 1)."""


class SharedDocument:
    """One kind's row of ``shared_documents``, reached through a pool (given as a function: a
    store's pool exists only once the store is open)."""

    def __init__(self, pool: Callable[[], asyncpg.Pool], kind: str) -> None:
        self._pool_of = pool
        self.kind = kind
        self.version: int | None = None
        """The version this object last read or wrote (None: never read)."""

    @property
    def _pool(self) -> asyncpg.Pool:
        return self._pool_of()

    @property
    def location(self) -> str:
        return f"postgres shared_documents[{self.kind}]"

    async def read_if_changed(self) -> tuple[bool, Any]:
        with storage_errors(f"read {self.kind}"):
            row = await self._pool.fetchrow(
                "SELECT version, document::text AS document FROM shared_documents"
                " WHERE kind = $1 AND version <> $2",
                self.kind,
                -1 if self.version is None else self.version,
            )
            if row is None:
                if self.version is not None:
                    return False, None
                self.version = _ABSENT
                return True, None
        self.version = int(row["version"])
        return True, json.loads(row["document"])

    async def update(self, change: Change) -> Any:
        with storage_errors(f"change {self.kind}"):
            async with self._pool.acquire() as connection, connection.transaction():
                await connection.execute(
                    "INSERT INTO shared_documents (kind, document, version) VALUES ($1, 'null', $2)"
                    " ON CONFLICT (kind) DO NOTHING",
                    self.kind,
                    _ABSENT,
                )
                text = await connection.fetchval(
                    "SELECT document::text FROM shared_documents WHERE kind = $1 FOR UPDATE", self.kind
                )
                document = change(json.loads(text))
                version = await connection.fetchval(
                    "UPDATE shared_documents SET document = $2::jsonb, version = version + 1"
                    " WHERE kind = $1 RETURNING version",
                    self.kind,
                    json.dumps(document, sort_keys=True),
                )
        self.version = int(version)
        return document

    async def adopt(self, document: Any) -> bool:
        """Store ``document`` as the first one of this kind; False (nothing written) when the
        database holds one already."""
        with storage_errors(f"adopt {self.kind}"):
            version = await self._pool.fetchval(
                "INSERT INTO shared_documents (kind, document, version) VALUES ($1, $2::jsonb, 1)"
                " ON CONFLICT (kind) DO NOTHING RETURNING version",
                self.kind,
                json.dumps(document, sort_keys=True),
            )
        return version is not None
