"""The share partitions a node leads, and the durable writes each change needs (Kafka's
``SharePartitionManager``, without the I/O).

A topic partition's leader keeps one :class:`SharePartition` per share group reading it. It is
made on first use from the share coordinator's stored state (ReadShareGroupState), or, when there
is none, from ``share.auto.offset.reset`` (then its initial state must be written first). Every
change that must survive a crash comes back as a :class:`StateWrite`, the payload of
WriteShareGroupState for :meth:`ShareStateShard.write_state`; the caller answers the client only
once that write is durable. Lock expiry runs for all partitions from one deadline
(:meth:`next_lock_deadline`), so the shell needs a single timer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partition_state import (
    AcknowledgeType,
    AcquiredRecords,
    SharePartition,
    SharePartitionView,
    StateBatch,
)
from kcoord.coordinator.share.state_records import ShareStateKey
from kcoord.coordinator.share.state_shard import StoredShareState
from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = ["ShareGroupPartitions", "StateWrite"]

TopicIdPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class StateWrite:
    """One WriteShareGroupState partition: what changed in a share partition."""

    key: ShareStateKey
    state_epoch: int
    """The state epoch the leader read: a write with an older one than the stored is fenced."""
    start_offset: int
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int


class ShareGroupPartitions:
    """Every (share group, topic partition) this node leads."""

    def __init__(self, config: ShareGroupConfig) -> None:
        self._config = config
        self._partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        self._state_epochs: dict[tuple[str, uuid.UUID, int], int] = {}

    def count(self) -> int:
        return len(self._partitions)

    def get(self, group_id: str, tp: TopicIdPartition) -> SharePartition | None:
        return self._partitions.get((group_id, *tp))

    def load(
        self,
        group_id: str,
        tp: TopicIdPartition,
        stored: StoredShareState | None,
        log_start: int,
        log_end: int,
        reset: str | None = None,
    ) -> StateWrite | None:
        """Make the share partition from its stored state; None, or the initial state to write first
        when there is none yet (nothing stored, or initialised with start offset -1 by the group
        coordinator): ``reset`` overrides ``share.auto.offset.reset``, a group config."""
        self._state_epochs[(group_id, *tp)] = 0 if stored is None else stored.state_epoch
        if stored is not None and stored.start_offset >= 0:
            share = SharePartition.restored(self._config, stored.start_offset, stored.state_batches)
            share.advance_to_log_start(log_start)
            self._partitions[(group_id, *tp)] = share
            return None
        share = SharePartition.initialised(self._config, log_start, log_end, reset)
        self._partitions[(group_id, *tp)] = share
        return self._write(group_id, tp, share, [])

    def acquire(
        self,
        group_id: str,
        member_id: str,
        tp: TopicIdPartition,
        fetched: tuple[int, int],
        now_ms: int,
        max_records: int | None = None,
    ) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` what it may have of the fetched ``(first, last)`` offsets."""
        return self._share(group_id, tp).acquire(member_id, fetched[0], fetched[1], now_ms, max_records)

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        tp: TopicIdPartition,
        ranges: Iterable[tuple[int, int, int]],
        now_ms: int = 0,
    ) -> StateWrite:
        """ShareAcknowledge (or acknowledgements on ShareFetch) for one partition: all or nothing."""
        share = self._share(group_id, tp)
        return self._write(group_id, tp, share, share.acknowledge(member_id, ranges, now_ms))

    def stage(
        self,
        group_id: str,
        member_id: str,
        tp: TopicIdPartition,
        ranges: Iterable[tuple[int, int, int]],
        now_ms: int = 0,
    ) -> tuple[int, bool]:
        """Stage one member's acknowledgements (all or nothing) for the partition's next write round;
        renewals take effect at once. Returns (offsets renewed, whether anything waits for a write)."""
        ranges = list(ranges)
        renewed = self._share(group_id, tp).stage(member_id, ranges, now_ms)
        return renewed, renewed < sum(last - first + 1 for first, last, _ in ranges)

    def begin_round(
        self, group_id: str, tp: TopicIdPartition, changed: Iterable[int] = ()
    ) -> StateWrite | None:
        """The write of the partition's next round: its staged acknowledgements as if settled, and the
        ``changed`` offsets (releases, expiries) as they are; None when the partition is gone."""
        share = self._partitions.get((group_id, *tp))
        if share is None:
            return None
        start, batches, done = share.begin_round(changed)
        state_epoch = self._state_epochs.get((group_id, *tp), 0)
        return StateWrite(ShareStateKey(group_id, *tp), state_epoch, start, tuple(batches), done)

    def end_round(self, group_id: str, tp: TopicIdPartition, durable: bool) -> dict[AcknowledgeType, int]:
        """The round's write is durable (its acknowledgements settle) or failed (they are unstaged)."""
        share = self._partitions.get((group_id, *tp))
        return {} if share is None else share.end_round(durable)

    def next_lock_deadline(self) -> int | None:
        deadlines = [
            d for share in self._partitions.values() if (d := share.next_lock_deadline()) is not None
        ]
        return min(deadlines) if deadlines else None

    def expire_locks(self, now_ms: int) -> list[StateWrite]:
        """Every lock past its deadline ends; one write per share partition that changed."""
        writes = []
        for (group_id, topic_id, partition), share in self._partitions.items():
            changed = share.expire_locks(now_ms)
            if changed:
                writes.append(self._write(group_id, (topic_id, partition), share, changed))
        return writes

    def release_member(self, group_id: str, member_id: str) -> list[StateWrite]:
        """The member left the group or closed its share session: its records go back."""
        writes = []
        for (group, topic_id, partition), share in self._partitions.items():
            if group == group_id:
                changed = share.release_member(member_id)
                if changed:
                    writes.append(self._write(group, (topic_id, partition), share, changed))
        return writes

    def alter_start_offset(self, group_id: str, tp: TopicIdPartition, offset: int) -> StateWrite:
        """AlterShareGroupOffsets for one partition (the caller checks that the group has no member)."""
        share = self._partitions.get((group_id, *tp))
        if share is None:
            share = self._partitions[(group_id, *tp)] = SharePartition(self._config, offset)
        share.reset_start_offset(offset)
        return self._write(group_id, tp, share, [])

    def forget(self, group_id: str, tp: TopicIdPartition) -> None:
        """DeleteShareGroupOffsets (or the leader moved away): drop the in-memory partition."""
        self._partitions.pop((group_id, *tp), None)
        self._state_epochs.pop((group_id, *tp), None)

    def groups_of(self, tp: TopicIdPartition) -> list[str]:
        """The groups with a share partition of ``tp`` here."""
        return sorted(group for group, topic_id, partition in self._partitions if (topic_id, partition) == tp)

    def describe(
        self, group_id: str, log_ends: dict[TopicIdPartition, int]
    ) -> dict[TopicIdPartition, SharePartitionView]:
        """DescribeShareGroupOffsets / ``kcoord groups describe``: each led partition of the group."""
        return {
            (topic_id, partition): share.describe(log_ends.get((topic_id, partition), share.end_offset))
            for (group, topic_id, partition), share in sorted(
                self._partitions.items(), key=lambda i: str(i[0])
            )
            if group == group_id
        }

    def _share(self, group_id: str, tp: TopicIdPartition) -> SharePartition:
        share = self._partitions.get((group_id, *tp))
        if share is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{group_id} has no share partition {tp}")
        return share

    def _write(
        self, group_id: str, tp: TopicIdPartition, share: SharePartition, changed: list[StateBatch]
    ) -> StateWrite:
        key = ShareStateKey(group_id, tp[0], tp[1])
        state_epoch = self._state_epochs.get((group_id, *tp), 0)
        return StateWrite(
            key, state_epoch, share.start_offset, tuple(changed), share.delivery_complete_count()
        )
