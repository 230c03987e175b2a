"""The cluster's security state on every node: adopted once from the files, then polled.

In cluster mode the ACLs, the SCRAM credentials and the group configs are documents in PostgreSQL
(:mod:`kcoord.storage.postgres.shared_documents`). A change made through any node commits there
before its client is answered. The other nodes learn of it here: every ``kcoord.node.lease.renew.ms``
(1 s by default, the topic catalogue's poll interval) :class:`SharedStatePoller` asks each document
whether its version moved (one indexed row each) and re-reads only those that did. So a change
applies everywhere within one poll interval plus a round trip; the cluster tests measure it.

A node that cannot poll (the database unreachable) keeps its last copy, but only for
``kcoord.cluster.state.max.staleness.ms``: past that, :class:`~kcoord.storage.documents.Freshness`
turns false and the authorizer and the SASL logins refuse (a retriable error, a failed login)
rather than decide with ACLs or users that may have changed meanwhile.

On a node's first start in cluster mode, the files a single node kept in its data directory are
adopted (:func:`adopt_files`): each kind is stored from this node's file only when the database has
no document of that kind yet, so the first node to start decides, once, and nothing the database
holds is overwritten. Topics are adopted the same way (:mod:`kcoord.cluster.shared_catalogue`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import structlog

from kcoord.protocol.errors import KafkaError
from kcoord.storage.data_files import DataFileError
from kcoord.storage.documents import FileDocument, Freshness
from kcoord.storage.postgres.shared_documents import SharedDocument
from kcoord.timer.periodic import PeriodicTask

__all__ = ["SharedStatePoller", "adopt_files"]

log = structlog.get_logger(__name__)

Refresh = Callable[[], Awaitable[None]]


async def adopt_files(pairs: Sequence[tuple[FileDocument, SharedDocument]]) -> None:
    """Store each file as its kind's first shared document (module docstring); the file is left
    in place and not read again in cluster mode."""
    for file, shared in pairs:
        document = await asyncio.to_thread(file.read)
        if await shared.adopt(document):
            if document is not None:
                log.warning("shared_state.adopted", kind=shared.kind, file=str(file.path))
        elif document is not None:
            log.warning(
                "shared_state.file_not_adopted",
                kind=shared.kind,
                file=str(file.path),
                reason="the cluster's database already holds this kind; the file is ignored",
            )


class SharedStatePoller:
    """Re-reads the shared documents that changed, every ``interval_s``, and records freshness."""

    def __init__(self, refreshes: Sequence[Refresh], freshness: Freshness, interval_s: float) -> None:
        self._refreshes = list(refreshes)
        self._freshness = freshness
        self._timeout_s = max(interval_s, (freshness.max_staleness_s or 10.0) / 2)
        """A poll stuck on an unreachable database fails after this, so the staleness is logged
        while it happens rather than when the connection attempt gives up."""
        self._polls = PeriodicTask(
            self.poll,
            interval_s,
            failure_event="shared_state.poll_failed",
            task_name="kcoord-shared-state-poll",
        )
        self._failing = False
        self._stale = False

    async def poll(self) -> bool:
        """One poll of every document; True when all were read."""
        try:
            async with asyncio.timeout(self._timeout_s):
                for refresh in self._refreshes:
                    await refresh()
        except (KafkaError, DataFileError, TimeoutError) as exc:
            if not self._failing:
                log.warning("shared_state.poll_failed", error=str(exc) or type(exc).__name__)
            self._failed()
            return False
        except Exception:
            log.exception("shared_state.poll_failed")
            self._failed()
            return False
        if self._failing:
            log.info("shared_state.poll_recovered", age_s=self._freshness.age_s())
        self._failing = self._stale = False
        self._freshness.succeeded()
        return True

    def _failed(self) -> None:
        self._failing = True
        if not self._stale and not self._freshness.fresh():
            self._stale = True
            log.warning(
                "shared_state.stale",
                age_s=self._freshness.age_s(),
                max_staleness_s=self._freshness.max_staleness_s,
                effect="ACL decisions answer REQUEST_TIMED_OUT, SASL logins fail",
            )

    def start(self) -> None:
        self._polls.start()

    async def stop(self) -> None:
        await self._polls.stop()
