"""Which share partitions of a group have state at the share coordinator: the group's
ShareGroupStatePartitionMetadata record (KIP-932), kept by the group coordinator.

A partition of a subscribed topic is *initializing* from the heartbeat that first needs it until
the share coordinator confirms InitializeShareGroupState, then *initialized*. One still
initializing after ``group.share.initialize.retry.interval.ms`` is asked for again. Deleting a
group's offsets (DeleteShareGroupOffsets, DeleteGroups) moves topics to *deleting* until the share
coordinator confirms DeleteShareGroupState. Each function takes the group as replayed and returns
the group's next record (or None when nothing changes) plus the partitions to ask about.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from kcoord.coordinator.share.group import ShareGroup
from kcoord.coordinator.share.group_records import (
    ShareGroupRecord,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    TopicPartitionsInfo,
)

__all__ = ["complete_deleting", "mark_deleting", "mark_initialized", "partitions", "to_initialize"]

Partitions = dict[uuid.UUID, tuple[int, ...]]
_EMPTY = ShareGroupStatePartitionMetadataValue((), (), ())


def _value(group: ShareGroup) -> ShareGroupStatePartitionMetadataValue:
    return group.state_metadata or _EMPTY


def _record(group: ShareGroup, value: ShareGroupStatePartitionMetadataValue) -> ShareGroupRecord | None:
    if value == _value(group):
        return None
    return ShareGroupRecord(ShareGroupStatePartitionMetadataKey(group.group_id), value)


def partitions(infos: Iterable[TopicPartitionsInfo]) -> Partitions:
    return {topic_id: parts for topic_id, _, parts, _ in infos}


def to_initialize(
    group: ShareGroup, topics: Mapping[str, tuple[uuid.UUID, int]], now_ms: int, retry_ms: int
) -> tuple[ShareGroupRecord | None, Partitions]:
    """The subscribed partitions with no state yet (or whose initialisation is overdue)."""
    value = _value(group)
    initialized = {(t, p) for t, _, parts, _ in value.initialized_topics for p in parts}
    initializing = {t: (name, parts, at) for t, name, parts, at in value.initializing_topics}
    needed: dict[uuid.UUID, list[int]] = {}
    names: dict[uuid.UUID, str] = {}
    for name, (topic_id, count) in sorted(topics.items()):
        names[topic_id] = name
        pending = initializing.get(topic_id)
        for partition in range(count):
            if (topic_id, partition) in initialized:
                continue
            if pending is not None and partition in pending[1] and now_ms - pending[2] < retry_ms:
                continue
            needed.setdefault(topic_id, []).append(partition)
    if not needed:
        return None, {}
    merged = dict(initializing)
    for topic_id, parts in needed.items():
        before = merged.get(topic_id, (names[topic_id], (), now_ms))[1]
        merged[topic_id] = (names[topic_id], tuple(sorted(set(before) | set(parts))), now_ms)
    new_value = ShareGroupStatePartitionMetadataValue(
        tuple((t, name, parts, at) for t, (name, parts, at) in sorted(merged.items())),
        value.initialized_topics,
        tuple((t, name) for t, name in value.deleting_topics if t not in needed),
    )
    return _record(group, new_value), {t: tuple(parts) for t, parts in needed.items()}


def mark_initialized(group: ShareGroup, done: Partitions) -> ShareGroupRecord | None:
    """The share coordinator initialised ``done``: they move from initializing to initialized."""
    value = _value(group)
    initializing = {t: (name, set(parts), at) for t, name, parts, at in value.initializing_topics}
    initialized = {t: (name, set(parts), at) for t, name, parts, at in value.initialized_topics}
    for topic_id, parts in done.items():
        name, pending, at = initializing.get(topic_id, ("", set(), 0))
        if topic_id in initialized:
            name, _, at = initialized[topic_id]
        pending.difference_update(parts)
        if pending:
            initializing[topic_id] = (name, pending, at)
        else:
            initializing.pop(topic_id, None)
        initialized[topic_id] = (name, initialized.get(topic_id, (name, set(), at))[1] | set(parts), at)
    return _record(
        group,
        ShareGroupStatePartitionMetadataValue(
            _infos(initializing), _infos(initialized), value.deleting_topics
        ),
    )


def mark_deleting(
    group: ShareGroup, topics: Mapping[uuid.UUID, tuple[str, int]] | None
) -> tuple[ShareGroupRecord | None, Partitions]:
    """Offsets of ``topics`` (id -> (name, partition count); None: every topic of the group) are
    deleted: their partitions with state move to deleting. A topic already deleting is deleted
    again, every partition of it."""
    value = _value(group)
    initialized = {t: (name, parts) for t, name, parts, _ in value.initialized_topics}
    initializing = {t: (name, parts) for t, name, parts, _ in value.initializing_topics}
    deleting = dict(value.deleting_topics)
    chosen = set(initialized) | set(initializing) | set(deleting) if topics is None else set(topics)
    delete: dict[uuid.UUID, set[int]] = {}
    for topic_id in chosen:
        for source in (initialized, initializing):
            if topic_id in source:
                delete.setdefault(topic_id, set()).update(source[topic_id][1])
                deleting[topic_id] = source[topic_id][0]
        if topic_id in deleting and topics is not None and topic_id in topics:
            name, count = topics[topic_id]
            deleting[topic_id] = name
            delete.setdefault(topic_id, set()).update(range(count))
    new_value = ShareGroupStatePartitionMetadataValue(
        tuple(i for i in value.initializing_topics if i[0] not in chosen),
        tuple(i for i in value.initialized_topics if i[0] not in chosen),
        tuple(sorted(deleting.items())),
    )
    return _record(group, new_value), {t: tuple(sorted(parts)) for t, parts in sorted(delete.items())}


def complete_deleting(group: ShareGroup, topic_ids: Iterable[uuid.UUID]) -> ShareGroupRecord | None:
    """The share coordinator deleted the state of ``topic_ids``: they leave the deleting set."""
    value = _value(group)
    gone = set(topic_ids)
    remaining = tuple((t, name) for t, name in value.deleting_topics if t not in gone)
    return _record(
        group,
        ShareGroupStatePartitionMetadataValue(value.initializing_topics, value.initialized_topics, remaining),
    )


def _infos(by_topic: dict[uuid.UUID, tuple[str, set[int], int]]) -> tuple[TopicPartitionsInfo, ...]:
    return tuple(
        (t, name, tuple(sorted(parts)), at) for t, (name, parts, at) in sorted(by_topic.items()) if parts
    )
