"""The topic catalogue of a cluster, kept in PostgreSQL and applied on every node.

In cluster mode (``kcoord.cluster.enable``) the ``topic_catalogue`` table
(:mod:`kcoord.storage.postgres.catalogue`) is the truth about which topics exist, their random
ids, partition counts and config overrides; ``topics.json`` is not used. A node commits every
change there (one transaction with the partition rows) before it answers the client, then applies
the catalogue as the database holds it to its own view, exactly as it applies other nodes'
changes: :func:`~kcoord.cluster.catalogue.diff` tells the
:class:`~kcoord.cluster.topic_manager.TopicManager` what was created, deleted (or deleted and
created again under a new id), grown or reconfigured. Logs are not created here: each partition's
owner reopens it from the database when it claims it.

Other nodes' changes arrive by polling: every membership renewal (``kcoord.node.lease.renew.ms``,
1 s by default) reads the catalogue's version, one indexed row, and reads the whole catalogue only
when it moved. Polling on the tick the node already runs was chosen over LISTEN/NOTIFY: it needs
no dedicated connection, and nothing is missed while the database restarts or the connection
drops (a notification sent meanwhile is lost; a version is not), at the price of a bound of one
renewal interval plus a round trip before a change is seen everywhere.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Protocol

import structlog

from kcoord.cluster.catalogue import (
    AdoptionRule,
    CatalogueDiff,
    CatalogueOutcome,
    ConfigChange,
    diff,
)
from kcoord.cluster.catalogue_errors import CatalogueError
from kcoord.storage.api import TopicInfo
from kcoord.storage.postgres.catalogue import DeleteOutcome, GrowOutcome, TopicCatalogue
from kcoord.storage.postgres.store import PostgresLogStore

__all__ = ["CatalogueObserver", "SharedCatalogue"]

log = structlog.get_logger(__name__)


class CatalogueObserver(Protocol):
    def catalogue_change_applied(self, change: str) -> None:
        """A change another node made reached this node (``created``, ``deleted``, ...)."""


class _NoObserver:
    def catalogue_change_applied(self, change: str) -> None:
        return None


def _now_ms() -> int:
    return int(time.time() * 1000)


class SharedCatalogue:
    """The ``topic_catalogue`` table as a :class:`~kcoord.cluster.catalogue.Catalogue`: rows as
    topics, outcomes as Kafka errors, and the version this node's view is the state of."""

    shared = True

    def __init__(self, store: PostgresLogStore, observer: CatalogueObserver | None = None) -> None:
        self._store = store
        self.observer: CatalogueObserver = observer or _NoObserver()
        self._version = 0

    @property
    def _table(self) -> TopicCatalogue:
        return TopicCatalogue(self._store.pool)

    async def load(self, found: Mapping[str, int], adopt: AdoptionRule) -> CatalogueDiff:
        """Adopt the topics whose logs a node serving this database alone left without a row, then
        read the catalogue; logs of topics it does not name are closed, not deleted."""
        adopted = await self._table.adopt_uncatalogued(adopt)
        for topic, partitions in sorted(adopted.items()):
            log.warning("topics.adopted_into_catalogue", topic=topic, partitions=partitions)
        loaded = await self._read({})
        names = {info.name for info in loaded.created}
        for topic, partitions in sorted(found.items()):
            if topic not in names:
                log.warning("topics.uncatalogued_logs_ignored", topic=topic, partitions=partitions)
                await self._forget(topic, partitions)
        return loaded

    async def moved(self) -> bool:
        """Whether the catalogue's version moved past the one the view is the state of (one
        indexed row)."""
        return await self._table.version() != self._version

    async def changes(self, view: Mapping[str, TopicInfo]) -> CatalogueDiff:
        return await self._read(view)

    async def create(self, topics: Sequence[TopicInfo], view: Mapping[str, TopicInfo]) -> CatalogueOutcome:
        """One transaction for every topic of the round; a name already taken is refused, and when the
        transaction fails every topic of the round is refused with its error."""
        refused: dict[str, Exception] = {}
        try:
            added = await self._table.create_many(topics, _now_ms())
        except Exception as exc:
            refused = {topic.name: exc for topic in topics}
        else:
            for name, was_added in added.items():
                if not was_added:
                    refused[name] = CatalogueError.ALREADY_EXISTS(name)
        return CatalogueOutcome(await self._read(view), refused)

    async def delete(self, name: str, view: Mapping[str, TopicInfo]) -> CatalogueOutcome:
        known = view.get(name)
        if known is not None and known.internal:
            return CatalogueOutcome.refusal(name, CatalogueError.INTERNAL_DELETE(name))

        async def commit() -> TopicInfo:
            outcome, row = await self._table.delete(name)
            if outcome is DeleteOutcome.UNKNOWN:
                raise CatalogueError.UNKNOWN(name)
            if outcome is DeleteOutcome.INTERNAL:
                raise CatalogueError.INTERNAL_DELETE(name)
            assert row is not None
            return row

        return await self._committed(name, commit(), view)

    async def add_partitions(
        self, totals: Mapping[str, int], view: Mapping[str, TopicInfo]
    ) -> CatalogueOutcome:
        """One transaction for every topic of ``totals``; then the catalogue is read, also when some
        or all were refused (a refusal means this node's view of them was stale)."""
        refused: dict[str, Exception] = {}
        try:
            outcomes = await self._table.add_partitions_many(totals, _now_ms())
        except Exception as exc:
            refused = dict.fromkeys(totals, exc)
        else:
            for name, (outcome, current) in outcomes.items():
                if outcome is GrowOutcome.UNKNOWN:
                    refused[name] = CatalogueError.UNKNOWN(name)
                elif outcome is GrowOutcome.NOT_GROWING:
                    refused[name] = CatalogueError.NOT_GROWING(name, current, totals[name])
        return CatalogueOutcome(await self._read(view), refused)

    async def alter_configs(
        self, name: str, change: ConfigChange, view: Mapping[str, TopicInfo]
    ) -> CatalogueOutcome:
        """``change`` applies to the overrides the database holds, under the catalogue's lock."""

        def guarded(current: dict[str, str], internal: bool) -> Mapping[str, str]:
            if internal:
                raise CatalogueError.INTERNAL_CONFIGS(name)
            return change(current)

        async def commit() -> None:
            if await self._table.alter_configs(name, guarded) is None:
                raise CatalogueError.UNKNOWN(name)

        return await self._committed(name, commit(), view)

    async def drop_logs(self, topic: TopicInfo) -> None:
        """Close this node's copies of a deleted topic's logs without touching the database (the
        deleting node removed the rows, and the name may already belong to a new topic)."""
        await self._forget(topic.name, topic.partitions)

    def applied_elsewhere(self, change: str) -> None:
        self.observer.catalogue_change_applied(change)

    async def _committed(
        self, name: str, commit: Awaitable[TopicInfo | None], view: Mapping[str, TopicInfo]
    ) -> CatalogueOutcome:
        """Commit, then read the catalogue, also when the commit was refused (a refusal means this
        node's view of ``name`` was stale)."""
        refused: dict[str, Exception] = {}
        topic: TopicInfo | None = None
        try:
            topic = await commit
        except Exception as exc:
            refused[name] = exc
        return CatalogueOutcome(await self._read(view), refused, topic)

    async def _read(self, view: Mapping[str, TopicInfo]) -> CatalogueDiff:
        snapshot = await self._table.snapshot()
        self._version = max(self._version, snapshot.version)
        changes = diff(view, snapshot.topics)
        changes.version = self._version
        return changes

    async def _forget(self, name: str, partitions: int) -> None:
        for partition in range(partitions):
            await self._store.forget(name, partition)
