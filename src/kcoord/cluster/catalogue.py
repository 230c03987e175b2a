"""The topic catalogue's protocol: what the topic manager asks of ``topics.json`` and of PostgreSQL.

A catalogue is the truth about which topics exist (name, random id, partition count, config
overrides, internal flag). Two implement :class:`Catalogue`:
:class:`~kcoord.cluster.file_catalogue.FileCatalogue` (one node, ``topics.json`` in the data
directory) and :class:`~kcoord.cluster.shared_catalogue.SharedCatalogue` (a cluster, the
``topic_catalogue`` table). Every change is committed to the catalogue first and then applied
to the :class:`~kcoord.cluster.topic_manager.TopicManager`'s view as a :class:`CatalogueDiff`, the
same way whether this node or another made it: the manager installs the topics, pushes their
configs to the logs it holds, and tells its listeners.

Also here, so both implementations agree: the rule for adopting topics found without a catalogue
entry (:func:`adopted_topic`, :func:`internal_topic_configs`). The texts of the errors a catalogue
change answers are in :mod:`kcoord.cluster.catalogue_errors`.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kcoord.cluster.topic_names import CONSUMER_OFFSETS, INTERNAL_TOPICS, TRANSACTION_STATE
from kcoord.config import Settings
from kcoord.storage.api import TopicInfo

__all__ = [
    "AdoptionRule",
    "Catalogue",
    "CatalogueDiff",
    "CatalogueOutcome",
    "ConfigChange",
    "TopicInfo",
    "adopted_topic",
    "diff",
    "internal_topic_configs",
    "new_topic_id",
]


def new_topic_id() -> uuid.UUID:
    """A random topic id Kafka would accept: never zero, never printing with a leading ``-``."""
    while True:
        topic_id = uuid.uuid4()
        text = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
        if topic_id.int != 0 and not text.startswith("-"):
            return topic_id


ConfigChange = Callable[[Mapping[str, str]], Mapping[str, str]]
"""New overrides from the current ones; raises ``KafkaError`` (INVALID_CONFIG) to refuse."""

AdoptionRule = Callable[[str, int], TopicInfo]
"""The catalogue entry of a topic found with ``partitions`` logs and no entry (name, partitions)."""


def internal_topic_configs(name: str, settings: Settings) -> dict[str, str]:
    """The overrides kcoord gives its internal topic ``name`` (the offsets and transaction state
    topics are compacted, with ``offsets.topic.segment.bytes`` and
    ``transaction.state.log.segment.bytes`` segments); none for any other name."""
    if name == TRANSACTION_STATE:
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(settings["transaction.state.log.segment.bytes"]),
        }
    if name != CONSUMER_OFFSETS:
        return {}
    return {"cleanup.policy": "compact", "segment.bytes": str(settings["offsets.topic.segment.bytes"])}


def adopted_topic(name: str, partitions: int, settings: Settings) -> TopicInfo:
    """The one adoption rule: a new id, internal when the name is reserved, kcoord's configs for an
    internal topic and no overrides otherwise."""
    internal = name in INTERNAL_TOPICS
    return TopicInfo(name, new_topic_id(), partitions, internal_topic_configs(name, settings), internal)


@dataclass(slots=True)
class CatalogueDiff:
    """What turns a node's view into the catalogue; deletions apply before creations (a recreated
    name appears in both, under its old and its new id)."""

    deleted: list[TopicInfo] = field(default_factory=list)
    created: list[TopicInfo] = field(default_factory=list)
    grown: list[TopicInfo] = field(default_factory=list)
    reconfigured: list[TopicInfo] = field(default_factory=list)
    version: int | None = None
    """The catalogue version the diff leads to (None: the catalogue keeps no version)."""


def diff(local: Mapping[str, TopicInfo], catalogue: Iterable[TopicInfo]) -> CatalogueDiff:
    """The changes that make ``local`` (name -> topic) what ``catalogue`` lists."""
    result = CatalogueDiff()
    seen: set[str] = set()
    for topic in catalogue:
        seen.add(topic.name)
        known = local.get(topic.name)
        if known is None or known.topic_id != topic.topic_id:
            if known is not None:
                result.deleted.append(known)
            result.created.append(topic)
            continue
        if topic.partitions > known.partitions:
            result.grown.append(topic)
        if dict(topic.configs) != dict(known.configs):
            result.reconfigured.append(topic)
    result.deleted.extend(info for name, info in local.items() if name not in seen)
    return result


@dataclass(slots=True)
class CatalogueOutcome:
    """A committed change (or round of creations): what to apply to the view, and per topic name
    why it was refused (a ``KafkaError``, or the exception a log creation raised)."""

    changes: CatalogueDiff
    refused: dict[str, Exception] = field(default_factory=dict)
    topic: TopicInfo | None = None
    """What a delete removed, as it was (None for other changes, or when refused)."""

    @classmethod
    def refusal(cls, name: str, error: Exception) -> CatalogueOutcome:
        """Nothing changed: ``name`` was refused with ``error``."""
        return cls(CatalogueDiff(), {name: error})

    def raise_refusal(self, name: str) -> None:
        if name in self.refused:
            raise self.refused[name]


class Catalogue(Protocol):
    """Where the topics are kept. Every change method commits first, then returns the diff that
    brings ``view`` (the manager's topics) to the catalogue as committed, refusals included; the
    manager applies it. The manager calls them one at a time (under its lock)."""

    shared: bool
    """Other nodes change it too: the view may be stale, so only the catalogue can say a name is
    taken (alone, the view is the catalogue and says it first, before any other check)."""

    async def load(self, found: Mapping[str, int], adopt: AdoptionRule) -> CatalogueDiff:
        """Reconcile the catalogue with the logs the store found (topic -> partition count), adopting
        uncatalogued ones by ``adopt`` where the catalogue does; the diff from an empty view."""

    async def moved(self) -> bool:
        """Whether the catalogue may hold changes the view has not seen (another node's)."""

    async def changes(self, view: Mapping[str, TopicInfo]) -> CatalogueDiff:
        """What turns ``view`` into the catalogue as it is now."""

    async def create(self, topics: Sequence[TopicInfo], view: Mapping[str, TopicInfo]) -> CatalogueOutcome:
        """Create each topic (with its logs where this catalogue makes them); a name already taken
        is refused with TOPIC_ALREADY_EXISTS, the others are created all the same."""

    async def delete(self, name: str, view: Mapping[str, TopicInfo]) -> CatalogueOutcome:
        """Delete a topic (UNKNOWN_TOPIC_OR_PARTITION, or INVALID_REQUEST for an internal one)."""

    async def add_partitions(
        self, totals: Mapping[str, int], view: Mapping[str, TopicInfo]
    ) -> CatalogueOutcome:
        """Grow each topic to its new partition count (topic -> total) in one commit; a topic is
        refused with UNKNOWN_TOPIC_OR_PARTITION, or INVALID_PARTITIONS when it already has as many,
        and the others are grown all the same."""

    async def alter_configs(
        self, name: str, change: ConfigChange, view: Mapping[str, TopicInfo]
    ) -> CatalogueOutcome:
        """Apply ``change`` to the overrides the catalogue holds (UNKNOWN_TOPIC_OR_PARTITION, or
        INVALID_REQUEST for an internal topic)."""

    async def drop_logs(self, topic: TopicInfo) -> None:
        """Let go of this node's logs of a topic deleted from the catalogue."""

    def applied_elsewhere(self, change: str) -> None:
        """A change another node made reached this node (``created``, ``deleted``, ...)."""
