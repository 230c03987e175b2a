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
TOPIC_ALREADY_EXISTS instead of racing. Listeners (the group coordinator) hear of a change once it
is durable.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

import structlog

from kcoord.cluster.topic_configs import effective_value, log_config_for, validate_topic_configs
from kcoord.cluster.topic_names import CONSUMER_OFFSETS, INTERNAL_TOPICS, check_topic_name
from kcoord.config import Settings
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.api import LogConfig, LogStore, PartitionLog
from kcoord.storage.atomic_file import write_text_atomically
from kcoord.storage.data_files import read_json_document

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

MAX_PARTITIONS = 100_000
"""Most partitions one topic may have: each is a log with open files, so the count is bounded."""


def shared_topic_id(name: str) -> uuid.UUID:
    """The id every node of a cluster gives topic ``name`` without asking another (same rules as
    :func:`new_topic_id`: never zero, never printing with a leading ``-``)."""
    salt = 0
    while True:
        topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"kcoord-topic:{salt}:{name}")
        text = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return topic_id
        salt += 1


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
    def __init__(self, store: LogStore, settings: Settings, data_dir: Path, *, shared: bool = False) -> None:
        self._store = store
        self._shared = shared
        """One of several nodes over one store: ids derive from names, logs are never orphans."""
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
        catalogue = await asyncio.to_thread(_read_catalogue, self._path)
        found: dict[str, int] = {}
        for topic, partition in self._store.partitions():
            found[topic] = max(found.get(topic, 0), partition + 1)
        if catalogue is None:
            adopted = [self._adopted(name, count) for name, count in sorted(found.items())]
            for info in adopted:
                log.warning("topics.adopted", topic=info.name, partitions=info.partitions)
            self._install(adopted)
            if adopted:
                await self._save()
        else:
            self._install(catalogue)
            if self._shared:
                self._install(
                    self._adopted(name, count) for name, count in found.items() if name not in self._topics
                )
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
        check_topic_name(name)
        if not self._settings["auto.create.topics.enable"] or name in INTERNAL_TOPICS:
            return None
        async with self._lock:
            existing = self._topics.get(name)
            if existing is not None:
                return existing
            info = TopicInfo(name, self._new_id(name), self._settings["num.partitions"])
            await self._create_locked(info)
            return info

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
            if name in self._topics:
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
            info = TopicInfo(name, self._new_id(name), partitions, overrides, internal)
            await self._create_locked(info)
            return info

    async def delete(self, name: str) -> TopicInfo:
        """Delete a topic and its logs; UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for internal ones."""
        async with self._lock:
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
            self._install([grown])
            await self._save()
            await self._create_logs(grown, range(info.partitions, new_total))
        log.info("topic.partitions_added", topic=name, partitions=new_total)
        self._notify(TopicEvent(TopicChange.PARTITIONS_ADDED, grown, info.partitions))
        return grown

    # --- internals ------------------------------------------------------------------------

    def _offsets_topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self._settings["offsets.topic.segment.bytes"]),
        }

    def _adopted(self, name: str, partitions: int) -> TopicInfo:
        internal = name in INTERNAL_TOPICS
        configs = self._offsets_topic_configs() if name == CONSUMER_OFFSETS else {}
        return TopicInfo(name, self._new_id(name), partitions, configs, internal)

    def _new_id(self, name: str) -> uuid.UUID:
        return shared_topic_id(name) if self._shared else new_topic_id()

    async def adopt(self, found: Mapping[str, int]) -> None:
        """A cluster node learns the topics other nodes created (and partitions they added) from the
        partition counts the shared store holds; listeners hear of them as of local changes."""
        async with self._lock:
            events: list[TopicEvent] = []
            for name, count in sorted(found.items()):
                known = self._topics.get(name)
                if known is None:
                    info = self._adopted(name, count)
                    events.append(TopicEvent(TopicChange.CREATED, info, 0))
                elif count > known.partitions:
                    info = replace(known, partitions=count)
                    events.append(TopicEvent(TopicChange.PARTITIONS_ADDED, info, known.partitions))
                else:
                    continue
                self._install([info])
                log.info("topics.adopted_from_cluster", topic=name, partitions=count)
            if events:
                await self._save()
        for event in events:
            self._notify(event)

    async def _create_locked(self, info: TopicInfo) -> None:
        """Logs first, catalogue second: a crash in between leaves orphan logs, deleted at load."""
        try:
            await self._create_logs(info, range(info.partitions))
        except Exception:
            await self._store.delete_topic(info.name)
            raise
        self._install([info])
        await self._save()
        log.info("topic.created", topic=info.name, topic_id=str(info.topic_id), partitions=info.partitions)
        self._notify(TopicEvent(TopicChange.CREATED, info, 0))

    async def _create_logs(self, info: TopicInfo, partitions: Iterable[int]) -> None:
        config = self.log_config(info)
        for partition in partitions:
            await self._store.create(info.name, partition, config)

    def _install(self, infos: Iterable[TopicInfo]) -> None:
        for info in infos:
            self._topics[info.name] = info
            self._by_id[info.topic_id] = info

    async def _save(self) -> None:
        document = {
            "version": _CATALOGUE_VERSION,
            "topics": [_to_json(info) for info in self.topics()],
        }
        await asyncio.to_thread(write_text_atomically, self._path, json.dumps(document, indent=1) + "\n")

    def _notify(self, event: TopicEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("topics.listener_failed", change=event.change.value, topic=event.topic.name)


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
