"""One partition of ``__share_group_state``: the share coordinator's state machine (Kafka's
``ShareCoordinatorShard``), on the same runtime contract as the group shard.

The durable state of each share partition it holds is a snapshot plus the updates written after
it. A write (Kafka's ``WriteShareGroupState``) is checked against the stored state epoch and
leader epoch (an older writer is fenced) and becomes one ShareUpdate record holding only the runs
it changes, or, every ``share.coordinator.snapshot.update.records.per.snapshot`` updates, one
ShareSnapshot of the merged state, so a load never replays more than that many updates per share
partition. State changes only by replaying records: an operation makes its records and replays
them at once, the same code a load runs (a failed append reloads the partition from its log).
Answers are released by the runtime once the records are durable, so a share partition's leader
acknowledges a client only after its state is on disk.

**Pruning.** The topic is never compacted (an update is a delta over its snapshot). As Kafka's
share coordinator, the shard tells the runtime below which offset its log holds nothing a load
needs (:meth:`ShareStateShard.redundant_below`, the oldest of the share partitions' latest
snapshots), and the runtime deletes those records. So that one idle share partition does not hold
that offset down for ever, :meth:`ShareStateShard.snapshot_cold_partitions` writes a new snapshot
of every share partition whose latest is older than
``share.coordinator.cold.partition.snapshot.interval.ms`` (Kafka's cold-partition snapshots; a pass
is skipped when every share partition's latest snapshot is already such a snapshot with nothing
written since). An operation is told where the log ends as it runs (``log_end``): its records land
at or after it, which is what pruning counts them at until a load gives their exact offsets.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partition_state import StateBatch
from kcoord.coordinator.share.redundant_offsets import RedundantOffsets
from kcoord.coordinator.share.state_records import (
    ShareSnapshotValue,
    ShareStateKey,
    ShareStateRecord,
    ShareUpdateValue,
)
from kcoord.protocol.errors import ErrorCode

__all__ = ["ShareStateShard", "StoredShareState", "merge_batches"]


@dataclass(frozen=True, slots=True)
class StoredShareState:
    """What ReadShareGroupState answers for one share partition (and what the shard keeps)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1
    create_timestamp: int = 0
    write_timestamp: int = 0
    updates_since_snapshot: int = 0

    @property
    def cold_snapshot(self) -> bool:
        """Whether the latest snapshot was a cold-partition one (Kafka marks it by a write time
        later than its create time) with no update written since."""
        return self.create_timestamp != self.write_timestamp and self.updates_since_snapshot == 0


def merge_batches(
    stored: Iterable[StateBatch], changed: Iterable[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    """``stored`` runs overlaid by ``changed`` ones, without what lies below ``start_offset``."""
    runs = list(stored)
    for batch in changed:
        kept: list[StateBatch] = []
        for run in runs:
            if run.last_offset < batch.first_offset or run.first_offset > batch.last_offset:
                kept.append(run)
                continue
            if run.first_offset < batch.first_offset:
                kept.append(replace(run, last_offset=batch.first_offset - 1))
            if run.last_offset > batch.last_offset:
                kept.append(replace(run, first_offset=batch.last_offset + 1))
        kept.append(batch)
        runs = kept
    merged: list[StateBatch] = []
    for run in sorted(runs, key=lambda r: r.first_offset):
        if run.last_offset < start_offset:
            continue
        if run.first_offset < start_offset:
            run = replace(run, first_offset=start_offset)
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.last_offset + 1 == run.first_offset
            and (last.delivery_state, last.delivery_count) == (run.delivery_state, run.delivery_count)
        ):
            merged[-1] = replace(last, last_offset=run.last_offset)
        else:
            merged.append(run)
    return tuple(merged)


class ShareStateShard:
    """The share partitions whose state lives on one ``__share_group_state`` partition."""

    def __init__(self, partition: int, config: ShareGroupConfig | None = None) -> None:
        self.partition = partition
        self._config = config or ShareGroupConfig()
        self._states: dict[tuple[str, uuid.UUID, int], StoredShareState] = {}
        self._redundant = RedundantOffsets()

    # -- requests

    def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StoredShareState | None:
        """ReadShareGroupState: the stored state, None when the share partition has none."""
        return self._states.get((group_id, topic_id, partition))

    def initialize_state(
        self,
        sink: Any,
        key: ShareStateKey,
        state_epoch: int,
        start_offset: int,
        now_ms: int,
        log_end: int = -1,
    ) -> CoordinatorResult:
        """InitializeShareGroupState: a new state epoch and start offset, no in-flight records.

        An older state epoch than the stored one is FENCED_STATE_EPOCH."""
        stored = self._states.get(_id(key))
        if stored is not None and state_epoch < stored.state_epoch:
            result = CoordinatorResult()
            result.respond(sink, ErrorCode.fenced_state_epoch)
            return result
        snapshot_epoch = 0 if stored is None else stored.snapshot_epoch + 1
        value = ShareSnapshotValue(snapshot_epoch, state_epoch, -1, start_offset, now_ms, now_ms, ())
        return self._apply([ShareStateRecord(key.as_snapshot(), value)], sink, ErrorCode.none, log_end)

    def write_state(
        self,
        sink: Any,
        key: ShareStateKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Iterable[StateBatch],
        now_ms: int,
        delivery_complete_count: int = -1,
        log_end: int = -1,
    ) -> CoordinatorResult:
        """WriteShareGroupState: the changed runs (and the new start offset, -1 for unchanged).

        A state epoch or leader epoch older than the stored one is fenced (FENCED_STATE_EPOCH,
        FENCED_LEADER_EPOCH) and writes nothing."""
        changed = tuple(batches)
        stored = self._states.get(_id(key))
        error = _fenced(stored, state_epoch, leader_epoch)
        if error is not ErrorCode.none:
            result = CoordinatorResult()
            result.respond(sink, error)
            return result
        record = self._write_record(
            key, stored, state_epoch, leader_epoch, start_offset, changed, now_ms, delivery_complete_count
        )
        return self._apply([record], sink, ErrorCode.none, log_end)

    def read_state_for_leader(
        self, sink: Any, key: ShareStateKey, leader_epoch: int, now_ms: int, log_end: int = -1
    ) -> CoordinatorResult:
        """ReadShareGroupState from a share partition's leader, with the leader epoch it leads under:
        answers ``(error, stored state)``. A newer leader epoch than the stored one is written first
        (a ShareUpdate that changes nothing else), so from then on the previous leader's writes are
        FENCED_LEADER_EPOCH; an older one is itself FENCED_LEADER_EPOCH. -1 (a single node) only reads."""
        stored = self._states.get(_id(key))
        result = CoordinatorResult()
        if stored is None or leader_epoch == -1 or leader_epoch == stored.leader_epoch:
            result.respond(sink, (ErrorCode.none, stored))
            return result
        if leader_epoch < stored.leader_epoch:
            result.respond(sink, (ErrorCode.fenced_leader_epoch, None))
            return result
        record = self._write_record(
            key, stored, stored.state_epoch, leader_epoch, -1, (), now_ms, stored.delivery_complete_count
        )
        self._redundant.written_from(log_end)
        self.replay(record)
        result = CoordinatorResult.of_records([record])
        result.respond(sink, (ErrorCode.none, self._states.get(_id(key))))
        return result

    def _write_record(
        self,
        key: ShareStateKey,
        stored: StoredShareState | None,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        changed: tuple[StateBatch, ...],
        now_ms: int,
        delivery_complete_count: int,
    ) -> ShareStateRecord:
        """The ShareUpdate of a write, or a ShareSnapshot when the share partition has none yet or
        enough updates since its last one."""
        if (
            stored is None
            or stored.updates_since_snapshot >= self._config.snapshot_update_records_per_snapshot
        ):
            start = start_offset if start_offset >= 0 or stored is None else stored.start_offset
            merged = merge_batches(() if stored is None else stored.state_batches, changed, start)
            snapshot = ShareSnapshotValue(
                0 if stored is None else stored.snapshot_epoch + 1,
                state_epoch if stored is None else max(state_epoch, stored.state_epoch),
                leader_epoch,
                max(start, 0),
                now_ms,
                now_ms,
                merged,
                delivery_complete_count,
            )
            return ShareStateRecord(key.as_snapshot(), snapshot)
        update = ShareUpdateValue(
            stored.snapshot_epoch, leader_epoch, start_offset, changed, delivery_complete_count
        )
        return ShareStateRecord(key.as_update(), update)

    def delete_state(self, sink: Any, key: ShareStateKey, log_end: int = -1) -> CoordinatorResult:
        """DeleteShareGroupState: tombstones for the share partition's snapshot and update keys."""
        records = [ShareStateRecord(key.as_snapshot(), None), ShareStateRecord(key.as_update(), None)]
        return self._apply(records, sink, ErrorCode.none, log_end)

    # -- pruning

    def redundant_below(self) -> int:
        """The offset below which this partition's log holds no record a load needs (0: none)."""
        return self._redundant.redundant_below()

    def snapshot_cold_partitions(self, now_ms: int, interval_ms: int, log_end: int = -1) -> CoordinatorResult:
        """A new snapshot (same state, next snapshot epoch, write time now) of every share partition
        whose latest snapshot was written ``interval_ms`` or longer ago; nothing when every share
        partition's latest snapshot is already a cold one with nothing written since."""
        states = self._states
        if all(stored.cold_snapshot for stored in states.values()):
            return CoordinatorResult()
        records = [
            ShareStateRecord(ShareStateKey(*key), _cold_snapshot(stored, now_ms))
            for key, stored in states.items()
            if stored.write_timestamp <= now_ms - interval_ms
        ]
        if not records:
            return CoordinatorResult()
        self._redundant.written_from(log_end)
        for record in records:
            self.replay(record)
        return CoordinatorResult.of_records(list(records))

    def share_partitions(self) -> list[tuple[str, uuid.UUID, int]]:
        return sorted(self._states, key=lambda k: (k[0], str(k[1]), k[2]))

    # -- the runtime's shard contract

    def replay(
        self, record: ShareStateRecord, offset: int = -1, producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        """One record of the log; a live write replays the records it makes through here too."""
        key = _id(record.key)
        value = record.value
        if value is None:
            self._redundant.replayed(key, offset, None)
            self._states.pop(key, None)
        elif isinstance(value, ShareSnapshotValue):
            self._redundant.replayed(key, offset, True)
            self._states[key] = StoredShareState(
                value.snapshot_epoch,
                value.state_epoch,
                value.leader_epoch,
                value.start_offset,
                value.state_batches,
                value.delivery_complete_count,
                value.create_timestamp,
                value.write_timestamp,
            )
        else:
            self._redundant.replayed(key, offset, False)
            self._replay_update(key, value)

    def replay_end_transaction_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """The share coordinator writes no transactional records."""

    def on_appended(self, records: list[Any]) -> None:
        """Nothing to do: the records were replayed when the operation made them."""

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()

    def on_timer(self, key: str, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()

    def unload(self) -> CoordinatorResult:
        return CoordinatorResult()

    # -- inner workings

    def _replay_update(self, key: tuple[str, uuid.UUID, int], value: ShareUpdateValue) -> None:
        stored = self._states.get(key)
        if stored is None or value.snapshot_epoch != stored.snapshot_epoch:
            return  # an update without its snapshot (the snapshot was deleted): nothing to apply to
        start = stored.start_offset if value.start_offset < 0 else value.start_offset
        self._states[key] = replace(
            stored,
            leader_epoch=value.leader_epoch,
            start_offset=start,
            state_batches=merge_batches(stored.state_batches, value.state_batches, start),
            delivery_complete_count=value.delivery_complete_count,
            updates_since_snapshot=stored.updates_since_snapshot + 1,
        )

    def _apply(
        self, records: list[ShareStateRecord], sink: Any, response: Any, log_end: int
    ) -> CoordinatorResult:
        self._redundant.written_from(log_end)
        for record in records:
            self.replay(record)
        result = CoordinatorResult.of_records(records)
        result.respond(sink, response)
        return result


def _cold_snapshot(stored: StoredShareState, now_ms: int) -> ShareSnapshotValue:
    """Kafka's cold-partition snapshot: the state as it is, created when the last one was, written now."""
    return ShareSnapshotValue(
        stored.snapshot_epoch + 1,
        stored.state_epoch,
        stored.leader_epoch,
        stored.start_offset,
        stored.create_timestamp,
        now_ms,
        stored.state_batches,
        stored.delivery_complete_count,
    )


def _id(key: ShareStateKey) -> tuple[str, uuid.UUID, int]:
    return key.group_id, key.topic_id, key.partition


def _fenced(stored: StoredShareState | None, state_epoch: int, leader_epoch: int) -> ErrorCode:
    if stored is None:
        return ErrorCode.none
    if state_epoch < stored.state_epoch:
        return ErrorCode.fenced_state_epoch
    if leader_epoch != -1 and leader_epoch < stored.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    return ErrorCode.none
