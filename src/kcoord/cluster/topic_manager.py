"""The topic catalogue: which topics exist, their ids, partition counts and config overrides.

The catalogue is a small JSON file in the data directory (``topics.json``), rewritten whole and
atomically (temporary file, fsync, rename, fsync of the directory) off the event loop after
every change. It is the truth about which topics exist; the log store holds their data.
At load the two are reconciled:

- a catalogued partition without a log gets an empty one (a crash after the catalogue write);
- logs of a topic the catalogue does not know are deleted (a crash during a delete, or a create
  that failed half-way), since the catalogue is only written once a topic is fully created;
- with no catalogue file at all (a data directory written before it existed, or the file lost),
  every topic found in the store is adopted with a new id and no overrides.

Changes run one at a time under one lock, so concurrent CreateTopics for the same name see
TOPIC_ALREADY_EXISTS instead of racing. Auto-creation comes in rounds (:meth:`TopicManager.ensure_many`,
what a Metadata request naming many new topics uses): the round's logs are created off the loop, a
few at a time, and the catalogue is written once for the round, not once per topic. The catalogue's
JSON is built and written in a worker thread, so a large catalogue costs the event loop nothing
but a copy of the topic list. Listeners (the group coordinator) hear of a change once it
is durable.

In a cluster (a :class:`~kcoord.cluster.shared_catalogue.SharedCatalogue` given) none of the above
file handling applies: the catalogue lives in PostgreSQL, every change is committed there first,
and this node's view follows it (:meth:`TopicManager.refresh`, on every membership renewal). Logs
are not created here then: each partition's owner reopens it from the database when it claims it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from kcoord.cluster.topic_configs import effective_value, log_config_for, validate_topic_configs
from kcoord.cluster.topic_names import CONSUMER_OFFSETS, INTERNAL_TOPICS, check_topic_name
from kcoord.config import Settings
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.api import LogConfig, LogStore, PartitionLog
from kcoord.storage.atomic_file import write_text_atomically
from kcoord.storage.data_files import read_json_document

if TYPE_CHECKING:
    from kcoord.cluster.shared_catalogue import SharedCatalogue

__all__ = [
    "CATALOGUE_FILE",
    "MAX_PARTITIONS",
    "TopicChange",
    "TopicEvent",
    "TopicInfo",
    "TopicListener",
    "TopicManager",
    "new_topic_id",
]

log = structlog.get_logger(__name__)

CATALOGUE_FILE = "topics.json"
_CATALOGUE_VERSION = 1

_LOGS_AT_ONCE = 32
"""Topics whose logs an auto-creation round creates concurrently (the store's threads do the I/O)."""

MAX_PARTITIONS = 100_000
"""Most partitions one topic may have: each is a log with open files, so the count is bounded."""


def new_topic_id() -> uuid.UUID:
    """A random topic id Kafka would accept: never zero, never printing with a leading ``-``."""
    while True:
        topic_id = uuid.uuid4()
        text = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
        if topic_id.int != 0 and not text.startswith("-"):
            return topic_id


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic as the catalogue holds it; replaced (never mutated) on change."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)
    """Overrides only, with Kafka's topic config names; see :mod:`kcoord.cluster.topic_configs`."""
    internal: bool = False


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


class TopicManager:
    def __init__(
        self, store: LogStore, settings: Settings, data_dir: Path, *, shared: SharedCatalogue | None = None
    ) -> None:
        self._store = store
        self._shared = shared
        """One of several nodes over one database: the catalogue there is the truth (module docstring)."""
        self._shared_version = 0
        """The shared catalogue's version this node's view is the state of."""
        self._settings = settings
        self._path = Path(data_dir) / CATALOGUE_FILE
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

    def log_config_of(self, name: str) -> LogConfig | None:
        """The log config of topic ``name`` as this node knows it (None: unknown topic)."""
        info = self._topics.get(name)
        return None if info is None else self.log_config(info)

    def max_message_bytes(self, info: TopicInfo) -> int:
        """The largest record batch a Produce to this topic may carry (``max.message.bytes``)."""
        return int(effective_value("max.message.bytes", info.configs, self._settings))

    def add_listener(self, listener: TopicListener) -> Callable[[], None]:
        """Call ``listener`` after every durable change; the returned function unregisters it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # --- loading --------------------------------------------------------------------------

    async def load(self) -> None:
        """Read the catalogue and reconcile it with the logs the store found (module docstring)."""
        if self._shared is not None:
            await self._load_shared(self._shared)
            return
        catalogue = await asyncio.to_thread(_read_catalogue, self._path)
        found = self._partition_counts()
        if catalogue is None:
            adopted = [self._adopted(name, count) for name, count in sorted(found.items())]
            for info in adopted:
                log.warning("topics.adopted", topic=info.name, partitions=info.partitions)
            self._install(adopted)
            if adopted:
                await self._save()
        else:
            self._install(catalogue)
            for orphan in sorted(set(found) - set(self._topics)):
                log.warning("topics.orphan_logs_deleted", topic=orphan)
                await self._store.delete_topic(orphan)
        for info in self._topics.values():
            await self._create_logs(info, range(info.partitions))
        log.info("topics.loaded", topics=len(self._topics))

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
        """:meth:`ensure` for many names in one round: one catalogue write for all that are created.

        Per name: the topic, None (may not be auto-created) or the ``KafkaError`` of an illegal name
        or of a creation that failed.
        """
        found: dict[str, TopicInfo | KafkaError | None] = {}
        wanted: list[str] = []
        allowed = bool(self._settings["auto.create.topics.enable"])
        for name in names:
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
            infos = [TopicInfo(n, new_topic_id(), partitions) for n in wanted if n not in self._topics]
            if self._shared is None:
                for name, error in (await self._create_round_locked(infos)).items():
                    found[name] = (
                        error
                        if isinstance(error, KafkaError)
                        else KafkaError(ErrorCode.unknown_server_error, f"creating {name}: {error!r}")
                    )
            else:
                for info in infos:
                    try:
                        await self._create_shared(self._shared, info)
                    except KafkaError as exc:
                        if exc.code != ErrorCode.topic_already_exists:
                            found[info.name] = exc
        for name in wanted:
            if not isinstance(found[name], KafkaError):
                found[name] = self._topics.get(name)
        return found

    async def ensure_offsets_topic(self, partitions: int) -> int:
        """Create ``__consumer_offsets`` (compacted, ``offsets.topic.segment.bytes`` segments) if
        missing; return its partition count, which an existing topic keeps whatever ``partitions``
        says (groups are placed by it, so it never changes)."""
        existing = self._topics.get(CONSUMER_OFFSETS)
        if existing is not None:
            return existing.partitions
        try:
            info = await self.create(
                CONSUMER_OFFSETS,
                partitions,
                self._settings["offsets.topic.replication.factor"],
                self._offsets_topic_configs(),
                internal=True,
            )
        except KafkaError as exc:
            if exc.code != ErrorCode.topic_already_exists:
                raise
            info = self._topics[CONSUMER_OFFSETS]
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
        """
        check_topic_name(name)
        if partitions == -1:
            partitions = self._settings["num.partitions"]
        if replication_factor == -1:
            replication_factor = self._settings["default.replication.factor"]
        overrides = validate_topic_configs(configs or {})
        async with self._lock:
            if name in self._topics and (self._shared is None or validate_only):
                raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
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
            if self._shared is None:
                await self._create_locked(info)
            else:
                await self._create_shared(self._shared, info)
            return info

    async def delete(self, name: str) -> TopicInfo:
        """Delete a topic and its logs; UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for internal ones."""
        async with self._lock:
            if self._shared is not None:
                return await self._delete_shared(self._shared, name)
            info = self._topics.get(name)
            if info is None:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
            if info.internal:
                raise KafkaError(ErrorCode.invalid_request, f"Internal topic '{name}' cannot be deleted.")
            del self._topics[name]
            del self._by_id[info.topic_id]
            await self._save()
            await self._store.delete_topic(name)
        log.info("topic.deleted", topic=name, topic_id=str(info.topic_id))
        self._notify(TopicEvent(TopicChange.DELETED, info, info.partitions))
        return info

    async def add_partitions(self, name: str, new_total: int, validate_only: bool = False) -> TopicInfo:
        """Grow ``name`` to ``new_total`` partitions; INVALID_PARTITIONS unless it grows."""
        async with self._lock:
            info = self._topics.get(name)
            if info is None:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
            if new_total <= info.partitions:
                raise KafkaError(
                    ErrorCode.invalid_partitions,
                    f"Topic currently has {info.partitions} partitions, which is higher than or equal "
                    f"to the requested {new_total}.",
                )
            if new_total > MAX_PARTITIONS:
                raise KafkaError(ErrorCode.invalid_partitions, f"At most {MAX_PARTITIONS} partitions.")
            grown = replace(info, partitions=new_total)
            if validate_only:
                return grown
            if self._shared is not None:
                await self._committed(self._shared, name, self._shared.add_partitions(name, new_total))
                return self._topics.get(name, grown)
            self._install([grown])
            await self._save()
            await self._create_logs(grown, range(info.partitions, new_total))
        log.info("topic.partitions_added", topic=name, partitions=new_total)
        self._notify(TopicEvent(TopicChange.PARTITIONS_ADDED, grown, info.partitions))
        return grown

    async def alter_configs(
        self, name: str, change: Callable[[Mapping[str, str]], Mapping[str, str]], validate_only: bool = False
    ) -> None:
        """Replace ``name``'s overrides with ``change(current overrides)`` (which validates them, raising
        ``KafkaError``) and apply them to its logs; UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for
        internal topics (kcoord sets those). In a cluster the current overrides are the database's."""
        async with self._lock:
            if self._shared is not None and not validate_only:
                await self._committed(self._shared, name, self._shared.alter_configs(name, change))
                return
            info = self._topics.get(name)
            if info is None:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
            if info.internal:
                raise KafkaError(
                    ErrorCode.invalid_request, f"kcoord manages internal topic '{name}''s configs."
                )
            altered = replace(info, configs=dict(change(info.configs)))
            if validate_only:
                return
            self._install([altered])
            await self._save()
            self._apply_log_config(altered)
        log.info("topic.configs_altered", topic=name, configs=dict(altered.configs))

    # --- the shared catalogue (cluster mode) ------------------------------------------------

    async def refresh(self) -> None:
        """Apply what other nodes changed in the shared catalogue, if its version moved (the
        membership calls this on every renewal; failures are logged and retried next time)."""
        if self._shared is None:
            return
        try:
            if await self._shared.version() == self._shared_version:
                return
            async with self._lock:
                await self._sync_locked(self._shared)
        except KafkaError as exc:
            log.warning("topics.catalogue_refresh_failed", error=exc.message)
        except Exception:
            log.exception("topics.catalogue_refresh_failed")

    async def _load_shared(self, shared: SharedCatalogue) -> None:
        for topic, partitions in sorted((await shared.adopt_uncatalogued()).items()):
            log.warning("topics.adopted_into_catalogue", topic=topic, partitions=partitions)
        self._shared_version, topics = await shared.snapshot()
        self._install(topics)
        for info in topics:
            self._apply_log_config(info)
        uncatalogued = {t: n for t, n in self._partition_counts().items() if t not in self._topics}
        for topic, partitions in sorted(uncatalogued.items()):
            log.warning("topics.uncatalogued_logs_ignored", topic=topic, partitions=partitions)
            await shared.forget_logs(topic, partitions)
        log.info("topics.loaded", topics=len(self._topics), catalogue_version=self._shared_version)

    async def _committed(self, shared: SharedCatalogue, name: str, change: Awaitable[Any]) -> Any:
        """Commit ``change`` to the shared catalogue, then bring this node's view up to date, also
        when it was refused (a refusal means this node's view of ``name`` was stale)."""
        try:
            return await change
        finally:
            await self._sync_locked(shared, changed_here=name)

    async def _create_shared(self, shared: SharedCatalogue, info: TopicInfo) -> None:
        await self._committed(shared, info.name, shared.create(info))

    async def _delete_shared(self, shared: SharedCatalogue, name: str) -> TopicInfo:
        known = self._topics.get(name)
        if known is not None and known.internal:
            raise KafkaError(ErrorCode.invalid_request, f"Internal topic '{name}' cannot be deleted.")
        deleted: TopicInfo = await self._committed(shared, name, shared.delete(name))
        return deleted

    async def _sync_locked(self, shared: SharedCatalogue, changed_here: str | None = None) -> None:
        """Make this node's view the shared catalogue: logs closed for deleted topics, configs
        applied to the logs it holds, listeners told, as for changes made here."""
        version, changes = await shared.changes_from(self._topics)
        if version <= self._shared_version and changed_here is None:
            return
        self._shared_version = max(version, self._shared_version)
        events: list[TopicEvent] = []
        for name in changes.deleted:
            gone = self._topics.pop(name)
            self._by_id.pop(gone.topic_id, None)
            await shared.forget_logs(name, gone.partitions)
            events.append(TopicEvent(TopicChange.DELETED, gone, gone.partitions))
            self._applied(shared, "deleted", gone, changed_here, topic_id=str(gone.topic_id))
        for info in changes.created:
            self._install([info])
            events.append(TopicEvent(TopicChange.CREATED, info, 0))
            self._applied(
                shared, "created", info, changed_here, topic_id=str(info.topic_id), partitions=info.partitions
            )
        for info in changes.grown:
            previous = self._topics[info.name].partitions
            self._install([info])
            events.append(TopicEvent(TopicChange.PARTITIONS_ADDED, info, previous))
            self._applied(shared, "partitions_added", info, changed_here, partitions=info.partitions)
        for info in changes.reconfigured:
            self._install([info])
            self._apply_log_config(info)
            self._applied(shared, "configs_altered", info, changed_here, configs=dict(info.configs))
        for event in events:
            self._notify(event)

    def _applied(
        self, shared: SharedCatalogue, change: str, info: TopicInfo, changed_here: str | None, **details: Any
    ) -> None:
        here = info.name == changed_here
        if not here:
            shared.observer.catalogue_change_applied(change)
        log.info(
            f"topic.{change}",
            topic=info.name,
            origin="this node" if here else "another node",
            catalogue_version=self._shared_version,
            **details,
        )

    def reapply_log_configs(self) -> None:
        """Give every log this node holds its topic's current config (the broker defaults changed)."""
        for info in list(self._topics.values()):
            self._apply_log_config(info)

    def _apply_log_config(self, info: TopicInfo) -> None:
        """Give the logs of ``info`` this node holds its current config."""
        config = self.log_config(info)
        for partition in range(info.partitions):
            partition_log = self._store.get(info.name, partition)
            if partition_log is not None:
                partition_log.update_config(config)

    # --- internals ------------------------------------------------------------------------

    def _partition_counts(self) -> dict[str, int]:
        """Topic -> partition count, as the logs the store found at open say."""
        found: dict[str, int] = {}
        for topic, partition in self._store.partitions():
            found[topic] = max(found.get(topic, 0), partition + 1)
        return found

    def _offsets_topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self._settings["offsets.topic.segment.bytes"]),
        }

    def _adopted(self, name: str, partitions: int) -> TopicInfo:
        internal = name in INTERNAL_TOPICS
        configs = self._offsets_topic_configs() if name == CONSUMER_OFFSETS else {}
        return TopicInfo(name, new_topic_id(), partitions, configs, internal)

    async def _create_locked(self, info: TopicInfo) -> None:
        """Logs first, catalogue second: a crash in between leaves orphan logs, deleted at load."""
        failed = await self._create_round_locked([info])
        if info.name in failed:
            raise failed[info.name]

    async def _create_round_locked(self, infos: list[TopicInfo]) -> dict[str, Exception]:
        """Creates the topics' logs (a few at a time, off the loop), then writes the catalogue once.

        A topic whose logs could not be created has them removed and is left out; it is returned
        with its error (the others are created all the same).
        """
        failed: dict[str, Exception] = {}
        created: list[TopicInfo] = []
        for start in range(0, len(infos), _LOGS_AT_ONCE):
            chunk = infos[start : start + _LOGS_AT_ONCE]
            outcomes = await asyncio.gather(
                *(self._create_logs(info, range(info.partitions)) for info in chunk), return_exceptions=True
            )
            for info, outcome in zip(chunk, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    await self._store.delete_topic(info.name)
                    if not isinstance(outcome, Exception):
                        raise outcome
                    log.warning("topic.create_failed", topic=info.name, error=repr(outcome))
                    failed[info.name] = outcome
                else:
                    created.append(info)
        if not created:
            return failed
        self._install(created)
        await self._save()
        for info in created:
            log.info(
                "topic.created", topic=info.name, topic_id=str(info.topic_id), partitions=info.partitions
            )
            self._notify(TopicEvent(TopicChange.CREATED, info, 0))
        return failed

    async def _create_logs(self, info: TopicInfo, partitions: Iterable[int]) -> None:
        config = self.log_config(info)
        for partition in partitions:
            await self._store.create(info.name, partition, config)

    def _install(self, infos: Iterable[TopicInfo]) -> None:
        for info in infos:
            self._topics[info.name] = info
            self._by_id[info.topic_id] = info

    async def _save(self) -> None:
        """Writes the whole catalogue; only the list of topics is taken on the loop."""
        await asyncio.to_thread(_write_catalogue, self._path, list(self._topics.values()))

    def _notify(self, event: TopicEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("topics.listener_failed", change=event.change.value, topic=event.topic.name)


def _write_catalogue(path: Path, topics: list[TopicInfo]) -> None:
    ordered = sorted(topics, key=lambda info: info.name)
    document = {"version": _CATALOGUE_VERSION, "topics": [_to_json(info) for info in ordered]}
    write_text_atomically(path, json.dumps(document, indent=1) + "\n")


def _to_json(info: TopicInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "topic_id": str(info.topic_id),
        "partitions": info.partitions,
        "configs": dict(sorted(info.configs.items())),
        "internal": info.internal,
    }


def _from_json(entry: Mapping[str, Any]) -> TopicInfo:
    return TopicInfo(
        name=str(entry["name"]),
        topic_id=uuid.UUID(str(entry["topic_id"])),
        partitions=int(entry["partitions"]),
        configs={str(k): str(v) for k, v in dict(entry.get("configs", {})).items()},
        internal=bool(entry.get("internal", False)),
    )


def _read_catalogue(path: Path) -> list[TopicInfo] | None:
    """The catalogued topics, or None when there is no catalogue file (DataFileError when it is bad)."""
    return read_json_document(path, _parse_catalogue, None)


def _parse_catalogue(document: Any) -> list[TopicInfo]:
    if document.get("version") != _CATALOGUE_VERSION:
        raise ValueError(f"unknown catalogue version {document.get('version')!r}")
    return [_from_json(entry) for entry in document["topics"]]
