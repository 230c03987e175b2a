"""The topics this node serves: a view of the catalogue, the changes to it, and their listeners.

The catalogue is the truth about which topics exist (:mod:`kcoord.cluster.catalogue`): on a node
alone ``topics.json`` (:mod:`kcoord.cluster.file_catalogue`), in a cluster the ``topic_catalogue``
table every node shares (:mod:`kcoord.cluster.shared_catalogue`). The manager holds this node's view
of it and applies every change the same way, whichever catalogue it is and whichever node made it:
the catalogue commits the change first and returns the diff from the view, then
:meth:`TopicManager._apply` installs the topics, pushes their configs to the logs this node holds
(the one place that does: :meth:`TopicManager._configure_logs`) and tells the listeners (the group
coordinator), so a listener hears of a change once it is durable. In a cluster, other nodes' changes
arrive by :meth:`TopicManager.refresh`, which the membership calls on every renewal.

Changes run one at a time under one lock, so concurrent CreateTopics for the same name see
TOPIC_ALREADY_EXISTS instead of racing. Auto-creation, CreateTopics and CreatePartitions come in
rounds (:meth:`TopicManager.ensure_many`, what a Metadata request naming many new topics uses,
:meth:`TopicManager.create_many` and :meth:`TopicManager.add_partitions_many`): one catalogue commit
for the round, not one per topic, and the round applied to the view in slices of a few milliseconds
(:mod:`kcoord.cluster.loop_slices`) so that other connections are served meanwhile.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, NamedTuple

import structlog

from kcoord.cluster.catalogue import (
    Catalogue,
    CatalogueDiff,
    CatalogueOutcome,
    ConfigChange,
    TopicInfo,
    adopted_topic,
    internal_topic_configs,
    new_topic_id,
)
from kcoord.cluster.catalogue_errors import CatalogueError
from kcoord.cluster.file_catalogue import CATALOGUE_FILE
from kcoord.cluster.loop_slices import LoopSlices
from kcoord.cluster.topic_configs import effective_value, log_config_for, validate_topic_configs
from kcoord.cluster.topic_names import CONSUMER_OFFSETS, INTERNAL_TOPICS, check_topic_name
from kcoord.config import Settings
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.api import LogConfig, LogStore, PartitionLog

__all__ = [
    "CATALOGUE_FILE",
    "MAX_PARTITIONS",
    "NewTopic",
    "TopicChange",
    "TopicEvent",
    "TopicInfo",
    "TopicListener",
    "TopicManager",
    "new_topic_id",
]

log = structlog.get_logger(__name__)

MAX_PARTITIONS = 100_000
"""Most partitions one topic may have: each is a log with open files, so the count is bounded."""


class TopicChange(Enum):
    CREATED = "created"
    PARTITIONS_ADDED = "partitions_added"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class TopicEvent:
    change: TopicChange
    topic: TopicInfo
    """The topic after the change (for DELETED: as it was)."""
    previous_partitions: int
    """Partition count before the change (0 for CREATED)."""


TopicListener = Callable[[TopicEvent], None]


class NewTopic(NamedTuple):
    """One topic a CreateTopics request asks for (-1: the node's default); see ``create_many``."""

    name: str
    partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str | None] | None = None


class TopicManager:
    def __init__(self, store: LogStore, settings: Settings, catalogue: Catalogue) -> None:
        self._store = store
        self._catalogue = catalogue
        self._settings = settings
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._lock = asyncio.Lock()
        self._listeners: list[TopicListener] = []

    # --- reading --------------------------------------------------------------------------

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def names(self) -> list[str]:
        return sorted(self._topics)

    @property
    def default_partitions(self) -> int:
        """Partitions of an auto-created topic (``num.partitions``)."""
        return int(self._settings["num.partitions"])

    def topics(self) -> list[TopicInfo]:
        return [self._topics[name] for name in sorted(self._topics)]

    def partition_log(self, name: str, partition: int) -> PartitionLog | None:
        """The log of ``name``-``partition``, or None for an unknown topic or partition."""
        info = self._topics.get(name)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return self._store.get(name, partition)

    def missing_log_error(self, name: str, partition: int) -> ErrorCode:
        """Why ``partition_log`` found no log: the partition exists but another node leads it
        (NOT_LEADER_OR_FOLLOWER, so the client refreshes its metadata), or it does not exist."""
        info = self._topics.get(name)
        if info is not None and 0 <= partition < info.partitions:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def log_config(self, info: TopicInfo) -> LogConfig:
        return log_config_for(info.configs, self._settings)

    def max_message_bytes(self, info: TopicInfo) -> int:
        """The largest record batch a Produce to this topic may carry (``max.message.bytes``)."""
        return int(effective_value("max.message.bytes", info.configs, self._settings))

    def add_listener(self, listener: TopicListener) -> Callable[[], None]:
        """Call ``listener`` after every durable change; the returned function unregisters it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # --- loading --------------------------------------------------------------------------

    async def load(self) -> None:
        """Reconcile the catalogue with the logs the store found, and take it as this node's view."""
        async with self._lock:
            loaded = await self._catalogue.load(self._partition_counts(), self._adopted)
            self._install(loaded.created)
            self._configure_logs(loaded.created)
        log.info("topics.loaded", topics=len(self._topics), catalogue_version=loaded.version)

    async def refresh(self) -> None:
        """Apply what other nodes changed in a shared catalogue, if it moved (the membership calls
        this on every renewal; failures are logged and retried next time)."""
        try:
            if not await self._catalogue.moved():
                return
            async with self._lock:
                await self._apply(await self._catalogue.changes(self._topics))
        except KafkaError as exc:
            log.warning("topics.catalogue_refresh_failed", error=exc.message)
        except Exception:
            log.exception("topics.catalogue_refresh_failed")

    # --- changing -------------------------------------------------------------------------

    async def ensure(self, name: str) -> TopicInfo | None:
        """The topic ``name``, auto-created with ``num.partitions`` when ``auto.create.topics.enable``.

        None when it does not exist and may not be auto-created (internal names never are);
        ``KafkaError(INVALID_TOPIC_EXCEPTION)`` for an illegal name.
        """
        existing = self._topics.get(name)
        if existing is not None:
            return existing
        found = (await self.ensure_many([name]))[name]
        if isinstance(found, KafkaError):
            raise found
        return found

    async def ensure_many(self, names: Iterable[str]) -> dict[str, TopicInfo | KafkaError | None]:
        """:meth:`ensure` for many names in one round: one catalogue commit for all that are created.

        Per name: the topic, None (may not be auto-created) or the ``KafkaError`` of an illegal name
        or of a creation that failed. A name another node created meanwhile is that topic.
        """
        found: dict[str, TopicInfo | KafkaError | None] = {}
        wanted: list[str] = []
        allowed = bool(self._settings["auto.create.topics.enable"])
        slices = LoopSlices()
        for name in names:
            await slices.pause()
            existing = self._topics.get(name)
            if existing is not None:
                found[name] = existing
                continue
            try:
                check_topic_name(name)
            except KafkaError as exc:
                found[name] = exc
                continue
            if not allowed or name in INTERNAL_TOPICS:
                found[name] = None
            elif name not in found:
                found[name] = None
                wanted.append(name)
        if not wanted:
            return found
        async with self._lock:
            partitions = self._settings["num.partitions"]
            infos: list[TopicInfo] = []
            for name in wanted:
                if name not in self._topics:
                    infos.append(TopicInfo(name, new_topic_id(), partitions))
                await slices.pause()
            outcome = await self._commit(self._catalogue.create(infos, self._topics), *wanted)
        for name, error in outcome.refused.items():
            if isinstance(error, KafkaError):
                if error.code != ErrorCode.topic_already_exists:
                    found[name] = error
            else:
                found[name] = KafkaError(ErrorCode.unknown_server_error, f"creating {name}: {error!r}")
        for name in wanted:
            if not isinstance(found[name], KafkaError):
                found[name] = self._topics.get(name)
        return found

    async def ensure_offsets_topic(self, partitions: int) -> int:
        """Create ``__consumer_offsets`` (compacted, ``offsets.topic.segment.bytes`` segments) if
        missing; return its partition count, which an existing topic keeps whatever ``partitions``
        says (groups are placed by it, so it never changes)."""
        return await self.ensure_internal_topic(CONSUMER_OFFSETS, partitions)

    async def ensure_internal_topic(self, name: str, partitions: int) -> int:
        """Create the coordinator topic ``name`` (``__consumer_offsets``, ``__transaction_state``)
        with kcoord's configs for it if missing; return its partition count (an existing topic keeps
        its own: keys are placed by it)."""
        existing = self._topics.get(name)
        if existing is not None:
            return existing.partitions
        try:
            info = await self.create(
                name,
                partitions,
                self._settings["offsets.topic.replication.factor"],
                internal_topic_configs(name, self._settings),
                internal=True,
            )
        except KafkaError as exc:
            if exc.code != ErrorCode.topic_already_exists:
                raise
            info = self._topics[name]
        return info.partitions

    async def create(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        validate_only: bool = False,
        *,
        internal: bool = False,
    ) -> TopicInfo:
        """Create a topic; -1 partitions / replication factor mean the node's defaults.

        Raises ``KafkaError`` with INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_REQUEST
        (an internal name from a client), INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR or
        INVALID_CONFIG. With ``validate_only`` nothing changes and the returned topic has the zero
        id. ``internal=True`` is kcoord's own path (the coordinator's ``__consumer_offsets``).
        In a cluster a name this node does not know yet may still be taken: the catalogue says.
        """
        check_topic_name(name)
        if partitions == -1:
            partitions = self._settings["num.partitions"]
        if replication_factor == -1:
            replication_factor = self._settings["default.replication.factor"]
        overrides = validate_topic_configs(configs or {})
        async with self._lock:
            if name in self._topics and (validate_only or not self._catalogue.shared):
                raise CatalogueError.ALREADY_EXISTS(name)
            if name in INTERNAL_TOPICS and not internal:
                raise KafkaError(ErrorCode.invalid_request, f"'{name}' is reserved for kcoord's internal use")
            if not 0 < partitions <= MAX_PARTITIONS:
                raise KafkaError(
                    ErrorCode.invalid_partitions,
                    f"Number of partitions must be between 1 and {MAX_PARTITIONS}, not {partitions}.",
                )
            if replication_factor != 1:
                raise KafkaError(
                    ErrorCode.invalid_replication_factor,
                    f"Replication factor {replication_factor} is not possible: kcoord is one node.",
                )
            if validate_only:
                return TopicInfo(name, uuid.UUID(int=0), partitions, overrides, internal)
            info = TopicInfo(name, new_topic_id(), partitions, overrides, internal)
            outcome = await self._commit(self._catalogue.create([info], self._topics), name)
            outcome.raise_refusal(name)
            return info

    async def create_many(
        self, requests: Sequence[NewTopic], validate_only: bool = False
    ) -> dict[str, TopicInfo | KafkaError]:
        """:meth:`create` for many topics in one round: each checked as :meth:`create` checks it, then
        one catalogue commit for all of them (their logs a few at a time off the loop).

        Per name: the topic or its ``KafkaError``.
        """
        found: dict[str, TopicInfo | KafkaError] = {}
        checked: list[TopicInfo] = []
        for request in requests:
            try:
                checked.append(await self.create(*request, validate_only=True))
            except KafkaError as exc:
                found[request.name] = exc
        if validate_only or not checked:
            return found | {info.name: info for info in checked}
        infos = [replace(info, topic_id=new_topic_id()) for info in checked if info.name not in found]
        async with self._lock:
            names = [info.name for info in infos]
            outcome = await self._commit(self._catalogue.create(infos, self._topics), *names)
        for info in infos:
            error = outcome.refused.get(info.name)
            if error is None:
                found[info.name] = self._topics.get(info.name, info)
            elif isinstance(error, KafkaError):
                found[info.name] = error
            else:
                found[info.name] = KafkaError(
                    ErrorCode.unknown_server_error, f"creating {info.name}: {error!r}"
                )
        return found

    async def delete(self, name: str) -> TopicInfo:
        """Delete a topic and its logs; UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for internal ones."""
        async with self._lock:
            outcome = await self._commit(self._catalogue.delete(name, self._topics), name)
        outcome.raise_refusal(name)
        assert outcome.topic is not None
        return outcome.topic

    async def add_partitions(self, name: str, new_total: int, validate_only: bool = False) -> TopicInfo:
        """Grow ``name`` to ``new_total`` partitions; INVALID_PARTITIONS unless it grows."""
        found = (await self.add_partitions_many([(name, new_total)], validate_only))[name]
        if isinstance(found, KafkaError):
            raise found
        return found

    async def add_partitions_many(
        self, changes: Sequence[tuple[str, int]], validate_only: bool = False
    ) -> dict[str, TopicInfo | KafkaError]:
        """:meth:`add_partitions` for many topics in one round: each checked as :meth:`add_partitions`
        checks it, then one catalogue commit for all that grow. Per name: the grown topic or its
        ``KafkaError``."""
        found: dict[str, TopicInfo | KafkaError] = {}
        totals: dict[str, int] = {}
        async with self._lock:
            for name, new_total in changes:
                try:
                    found[name] = self._grown(name, new_total)
                    totals[name] = new_total
                except KafkaError as exc:
                    found[name] = exc
            if validate_only or not totals:
                return found
            outcome = await self._commit(self._catalogue.add_partitions(totals, self._topics), *totals)
        for name in totals:
            error = outcome.refused.get(name)
            if error is None:
                found[name] = self._topics.get(name, found[name])
            elif isinstance(error, KafkaError):
                found[name] = error
            else:
                found[name] = KafkaError(ErrorCode.unknown_server_error, f"growing {name}: {error!r}")
        return found

    def _grown(self, name: str, new_total: int) -> TopicInfo:
        """``name`` with ``new_total`` partitions, if it may grow to that many (``KafkaError`` if not)."""
        info = self._topics.get(name)
        if info is None:
            raise CatalogueError.UNKNOWN(name)
        if new_total <= info.partitions:
            raise CatalogueError.NOT_GROWING(name, info.partitions, new_total)
        if new_total > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.invalid_partitions, f"At most {MAX_PARTITIONS} partitions.")
        return replace(info, partitions=new_total)

    async def alter_configs(self, name: str, change: ConfigChange, validate_only: bool = False) -> None:
        """Replace ``name``'s overrides with ``change(current overrides)`` (which validates them, raising
        ``KafkaError``) and apply them to its logs; UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for
        internal topics (kcoord sets those). The current overrides are the catalogue's."""
        async with self._lock:
            if validate_only:
                info = self._topics.get(name)
                if info is None:
                    raise CatalogueError.UNKNOWN(name)
                if info.internal:
                    raise CatalogueError.INTERNAL_CONFIGS(name)
                change(info.configs)
                return
            outcome = await self._commit(self._catalogue.alter_configs(name, change, self._topics), name)
        outcome.raise_refusal(name)

    def reapply_log_configs(self) -> None:
        """Give every log this node holds its topic's current config (the broker defaults changed)."""
        self._configure_logs(list(self._topics.values()))

    # --- applying the catalogue -------------------------------------------------------------

    async def _commit(self, change: Awaitable[CatalogueOutcome], *names: str) -> CatalogueOutcome:
        """Run a catalogue change of topics ``names`` and apply what the catalogue then holds (the
        caller holds the lock)."""
        outcome = await change
        await self._apply(outcome.changes, changed_here=set(names))
        return outcome

    async def _apply(self, changes: CatalogueDiff, changed_here: set[str] | None = None) -> None:
        """Make this node's view the catalogue: logs let go for deleted topics, configs pushed to the
        logs it holds, listeners told; the same for changes made here and elsewhere.

        A round of thousands of topics is applied in slices (:class:`LoopSlices`): installed, then
        configured, then announced, in that order as one change would be, yielding to the loop
        between topics so that other connections are served meanwhile."""
        here = changed_here or set()
        slices = LoopSlices()
        events: list[TopicEvent] = []
        for gone in changes.deleted:
            self._topics.pop(gone.name, None)
            self._by_id.pop(gone.topic_id, None)
            await self._catalogue.drop_logs(gone)
            events.append(TopicEvent(TopicChange.DELETED, gone, gone.partitions))
            self._applied("deleted", gone, here, changes.version, topic_id=str(gone.topic_id))
        for info in changes.created:
            self._install([info])
            events.append(TopicEvent(TopicChange.CREATED, info, 0))
            self._applied(
                "created",
                info,
                here,
                changes.version,
                topic_id=str(info.topic_id),
                partitions=info.partitions,
            )
            await slices.pause()
        for info in changes.grown:
            previous = self._topics[info.name].partitions
            self._install([info])
            events.append(TopicEvent(TopicChange.PARTITIONS_ADDED, info, previous))
            self._applied("partitions_added", info, here, changes.version, partitions=info.partitions)
            await slices.pause()
        for info in changes.reconfigured:
            self._install([info])
            self._applied("configs_altered", info, here, changes.version, configs=dict(info.configs))
            await slices.pause()
        for info in [*changes.created, *changes.grown, *changes.reconfigured]:
            self._configure_logs([info])
            await slices.pause()
        for event in events:
            self._notify(event)
            await slices.pause()

    def _applied(
        self, change: str, info: TopicInfo, here: set[str], version: int | None, **details: Any
    ) -> None:
        local = info.name in here
        if not local:
            self._catalogue.applied_elsewhere(change)
        if version is not None:
            details["catalogue_version"] = version
        log.info(
            f"topic.{change}", topic=info.name, origin="this node" if local else "another node", **details
        )

    def _configure_logs(self, infos: Iterable[TopicInfo]) -> None:
        """The one path by which topic configs reach the logs: the store gives each partition of
        each topic its current config, now if its log is open and whenever it is (re)opened."""
        for info in infos:
            config = self.log_config(info)
            for partition in range(info.partitions):
                self._store.configure(info.name, partition, config)

    # --- internals ------------------------------------------------------------------------

    def _adopted(self, name: str, partitions: int) -> TopicInfo:
        return adopted_topic(name, partitions, self._settings)

    def _partition_counts(self) -> dict[str, int]:
        """Topic -> partition count, as the logs the store found at open say."""
        found: dict[str, int] = {}
        for topic, partition in self._store.partitions():
            found[topic] = max(found.get(topic, 0), partition + 1)
        return found

    def _install(self, infos: Iterable[TopicInfo]) -> None:
        for info in infos:
            self._topics[info.name] = info
            self._by_id[info.topic_id] = info

    def _notify(self, event: TopicEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("topics.listener_failed", change=event.change.value, topic=event.topic.name)
