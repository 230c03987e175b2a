"""The topic catalogue of a cluster, kept in PostgreSQL and applied on every node.

In cluster mode (``kcoord.cluster.enable``) the ``topic_catalogue`` table
(:mod:`kcoord.storage.postgres.catalogue`) is the truth about which topics exist, their random
ids, partition counts and config overrides; ``topics.json`` is not used. A node commits every
change there (one transaction with the partition rows) before it answers the client, then applies
the catalogue as the database holds it to its own view, exactly as it applies other nodes'
changes: :func:`diff` tells the :class:`~kcoord.cluster.topic_manager.TopicManager` what was
created, deleted (or deleted and created again under a new id), grown or reconfigured.

Other nodes' changes arrive by polling: every membership renewal (``kcoord.node.lease.renew.ms``,
1 s by default) reads the catalogue's version, one indexed row, and reads the whole catalogue only
when it moved. Polling on the tick the node already runs was chosen over LISTEN/NOTIFY: it needs
no dedicated connection, and nothing is missed while the database restarts or the connection
drops (a notification sent meanwhile is lost; a version is not), at the price of a bound of one
renewal interval plus a round trip before a change is seen everywhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kcoord.cluster.membership import PartitionHost
from kcoord.cluster.topic_manager import TopicInfo
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.api import LogConfig, PartitionLog
from kcoord.storage.postgres.catalogue import CatalogueRow, DeleteOutcome, GrowOutcome, TopicCatalogue
from kcoord.storage.postgres.store import PostgresLogStore

__all__ = ["CatalogueDiff", "CatalogueObserver", "ConfiguredHost", "SharedCatalogue", "diff"]


class CatalogueObserver(Protocol):
    def catalogue_change_applied(self, change: str) -> None:
        """A change another node made reached this node (``created``, ``deleted``, ...)."""


class _NoObserver:
    def catalogue_change_applied(self, change: str) -> None:
        return None


@dataclass(slots=True)
class CatalogueDiff:
    """What turns a node's view into the shared catalogue; deletions apply before creations (a
    recreated name appears in both, under its old and its new id)."""

    deleted: list[str] = field(default_factory=list)
    created: list[TopicInfo] = field(default_factory=list)
    grown: list[TopicInfo] = field(default_factory=list)
    reconfigured: list[TopicInfo] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.deleted or self.created or self.grown or self.reconfigured)


def diff(local: Mapping[str, TopicInfo], shared: Iterable[TopicInfo]) -> CatalogueDiff:
    """The changes that make ``local`` (name -> topic) what ``shared`` lists."""
    result = CatalogueDiff()
    seen: set[str] = set()
    for topic in shared:
        seen.add(topic.name)
        known = local.get(topic.name)
        if known is None or known.topic_id != topic.topic_id:
            if known is not None:
                result.deleted.append(topic.name)
            result.created.append(topic)
            continue
        if topic.partitions > known.partitions:
            result.grown.append(topic)
        if dict(topic.configs) != dict(known.configs):
            result.reconfigured.append(topic)
    result.deleted.extend(name for name in local if name not in seen)
    return result


def _topic(row: CatalogueRow) -> TopicInfo:
    """The catalogue row as the topic manager's :class:`TopicInfo` (storage cannot import it, so
    the row is its own type of the same fields)."""
    return TopicInfo(row.name, row.topic_id, row.partitions, dict(row.configs), row.internal)


class SharedCatalogue:
    """The topic manager's access to the shared catalogue: rows as topics, outcomes as Kafka errors."""

    def __init__(self, store: PostgresLogStore, observer: CatalogueObserver | None = None) -> None:
        self._store = store
        self.observer: CatalogueObserver = observer or _NoObserver()

    @property
    def _table(self) -> TopicCatalogue:
        return TopicCatalogue(self._store.pool)

    async def version(self) -> int:
        return await self._table.version()

    async def snapshot(self) -> tuple[int, list[TopicInfo]]:
        """The catalogue's version and every topic in it, read together."""
        snapshot = await self._table.snapshot()
        return snapshot.version, [_topic(row) for row in snapshot.topics]

    async def changes_from(self, local: Mapping[str, TopicInfo]) -> tuple[int, CatalogueDiff]:
        """The catalogue's version and what turns ``local`` into it."""
        version, topics = await self.snapshot()
        return version, diff(local, topics)

    async def adopt_uncatalogued(self) -> dict[str, int]:
        """Catalogue the topics whose logs a node serving this database alone left without a row."""
        return await self._table.adopt_uncatalogued()

    async def create(self, topic: TopicInfo) -> None:
        """Commit a new topic; TOPIC_ALREADY_EXISTS when any node holds the name already."""
        row = CatalogueRow(topic.name, topic.topic_id, topic.partitions, dict(topic.configs), topic.internal)
        if not await self._table.create(row, int(time.time() * 1000)):
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists.")

    async def delete(self, name: str) -> TopicInfo:
        """Commit a deletion and return the topic as it was; UNKNOWN_TOPIC_OR_PARTITION, or
        INVALID_REQUEST for an internal topic."""
        outcome, row = await self._table.delete(name)
        if outcome is DeleteOutcome.UNKNOWN:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
        if outcome is DeleteOutcome.INTERNAL:
            raise KafkaError(ErrorCode.invalid_request, f"Internal topic '{name}' cannot be deleted.")
        assert row is not None
        return _topic(row)

    async def add_partitions(self, name: str, new_total: int) -> None:
        """Commit partition growth; UNKNOWN_TOPIC_OR_PARTITION, or INVALID_PARTITIONS when the topic
        (grown by another node meanwhile) already has as many."""
        outcome, current = await self._table.add_partitions(name, new_total, int(time.time() * 1000))
        if outcome is GrowOutcome.UNKNOWN:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
        if outcome is GrowOutcome.NOT_GROWING:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {current} partitions, which is higher than or equal "
                f"to the requested {new_total}.",
            )

    async def alter_configs(
        self, name: str, change: Callable[[Mapping[str, str]], Mapping[str, str]]
    ) -> None:
        """Commit ``change`` of a topic's overrides, applied to the overrides the database holds;
        UNKNOWN_TOPIC_OR_PARTITION when it is gone, INVALID_REQUEST for an internal topic."""

        def guarded(current: dict[str, str], internal: bool) -> Mapping[str, str]:
            if internal:
                raise KafkaError(
                    ErrorCode.invalid_request, f"kcoord manages internal topic '{name}''s configs."
                )
            return change(current)

        if await self._table.alter_configs(name, guarded) is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")

    async def forget_logs(self, name: str, partitions: int) -> None:
        """Close this node's copies of a deleted topic's logs without touching the database (the
        deleting node removed the rows, and the name may already belong to a new topic)."""
        for partition in range(partitions):
            await self._store.forget(name, partition)


class ConfiguredHost:
    """Gives a claimed partition's log, reopened fresh from the database, its topic's config
    (retention, segment size, compaction) before the inner host serves it."""

    def __init__(
        self, inner: PartitionHost, topic: str, config_of: Callable[[str], LogConfig | None]
    ) -> None:
        self._inner = inner
        self._topic = topic
        self._config_of = config_of

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None:
        config = self._config_of(self._topic)
        if config is not None:
            partition_log.update_config(config)
        await self._inner.acquire(partition, partition_log)

    async def release(self, partition: int) -> None:
        await self._inner.release(partition)
