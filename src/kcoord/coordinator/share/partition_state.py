"""One share partition: the records a share group has in flight on one topic partition.

After Kafka's ``SharePartition`` (KIP-932). The *start offset* is the first offset whose delivery
is not complete; everything below it is done. From there to the *end offset* (one past the last
offset ever acquired) each record is in one of four states:

==============  ==================================================================================
Available       may be acquired (never delivered yet after a restore, or released, or its lock expired)
Acquired        delivered to one member under a lock until ``lock_deadline_ms``; only it may acknowledge
Acknowledged    accepted by its member: done
Archived        rejected, a gap, or delivered ``group.share.delivery.count.limit`` times: done
==============  ==================================================================================

Each acquisition counts one delivery. A release, an expired lock or the member leaving makes an
Acquired record Available again, or Archived once its delivery count reached the limit. The start
offset moves past the head as long as the head is done. What must survive a crash is given back
as :class:`StateBatch` runs, the shape of ``WriteShareGroupState`` and of the
``__share_group_state`` records.

**Delivery counts are persisted on release, not on acquisition**, as Kafka 4.2's ``SharePartition``:
acquiring a record writes nothing (``acquire`` returns no state batches), a release, an expired lock
or a leaving member writes the record Available (or Archived) with its count, and an Acquired record
that a write happens to cover is written as Available with the count it had before that acquisition
(KIP-932: "an Acquired record with a delivery count of 1 is recorded as Available with a delivery
count of 0"). So after a crash a record acquired N times and released N-1 times is delivered again
with count N, its last, unfinished, delivery forgotten.

**Acknowledgements settle only once durable.** As Kafka's ``SharePartition`` starts a state
transition, persists it and rolls it back when the persist fails, an acknowledgement here is first
*staged* (:meth:`stage`): its records stay Acquired by their member, but no lock expiry, release or
other acknowledgement touches them. A write round (:meth:`begin_round`) takes every staged
acknowledgement and gives what the state would be with them settled; :meth:`end_round` settles them
once that write is durable, or unstages them when it failed (they are Acquired again as before, and
their lock runs on). Memory is therefore never ahead of disk for an acknowledgement, and
acknowledgements that arrive while a round is written go into the next one.

Pure and per record (the window is bounded by ``group.share.partition.max.record.locks``): no I/O,
and time is handed in.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "AcknowledgeType",
    "AcquiredRecords",
    "RecordState",
    "SharePartition",
    "SharePartitionView",
    "StateBatch",
    "acknowledgement_ranges",
]


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` ids (the persisted delivery states are 0, 2 and 4)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge ``AcknowledgeTypes``: 0 marks a gap (an offset with no record);
    4 renews the record's acquisition lock (KIP-1222, ShareFetch/ShareAcknowledge v2)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets with one persisted delivery state (0, 2 or 4) and delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """ShareFetch's ``AcquiredRecords``: a run of offsets acquired with the same delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartitionView:
    """Describe's view: the window and its counts, and the lag given the log end."""

    start_offset: int
    end_offset: int
    available: int
    acquired: int
    acknowledged: int
    archived: int
    lag: int


def acknowledgement_ranges(
    first_offset: int, last_offset: int, types: tuple[int, ...]
) -> list[tuple[int, int, int]]:
    """One ``AcknowledgementBatch`` of ShareFetch/ShareAcknowledge as ``(first, last, type)`` ranges: one
    type for the whole batch, or one type per offset (any other count is INVALID_REQUEST)."""
    if len(types) == 1:
        return [(first_offset, last_offset, types[0])]
    if len(types) != last_offset - first_offset + 1:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"{len(types)} acknowledge types for offsets {first_offset}-{last_offset}",
        )
    return [(first_offset + i, first_offset + i, kind) for i, kind in enumerate(types)]


@dataclass(slots=True)
class _InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int = -1


class SharePartition:
    """The in-flight records of one (share group, topic partition)."""

    def __init__(self, config: ShareGroupConfig, start_offset: int) -> None:
        self._config = config
        self.start_offset = start_offset
        self.end_offset = start_offset
        self._records: dict[int, _InFlight] = {}
        self._staged: dict[int, AcknowledgeType] = {}
        """Acknowledged offsets waiting for the next write round, with their acknowledge type."""
        self._writing: dict[int, AcknowledgeType] = {}
        """Acknowledged offsets of the round being written (settled once it is durable)."""

    @classmethod
    def initialised(
        cls, config: ShareGroupConfig, log_start: int, log_end: int, reset: str | None = None
    ) -> SharePartition:
        """A share partition read for the first time: ``share.auto.offset.reset`` picks the start."""
        reset = reset or config.auto_offset_reset
        if reset not in ("earliest", "latest"):
            raise KafkaError(ErrorCode.invalid_config, f"share.auto.offset.reset={reset!r}")
        return cls(config, log_start if reset == "earliest" else log_end)

    @classmethod
    def restored(
        cls, config: ShareGroupConfig, start_offset: int, batches: Iterable[StateBatch]
    ) -> SharePartition:
        """The partition as its durable state left it: offsets inside the window that no batch covers
        were never delivered (Available, count 0); Acquired never appears (written as Available)."""
        partition = cls(config, start_offset)
        for batch in batches:
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                state = RecordState(batch.delivery_state)
                if state is RecordState.ACQUIRED:
                    state = RecordState.AVAILABLE
                partition._records[offset] = _InFlight(state, batch.delivery_count)
                partition.end_offset = max(partition.end_offset, offset + 1)
        for offset in range(start_offset, partition.end_offset):
            partition._records.setdefault(offset, _InFlight(RecordState.AVAILABLE, 0))
        partition._advance_start()
        return partition

    # -- reading

    def next_fetch_offset(self) -> int:
        """Where the next fetch should read from: the first Available offset, else the end."""
        for offset in range(self.start_offset, self.end_offset):
            if self._records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def record_state(self, offset: int) -> tuple[RecordState, int, str | None] | None:
        """(state, delivery count, member) of an offset in the window, None outside it."""
        record = self._records.get(offset)
        return None if record is None else (record.state, record.delivery_count, record.member_id)

    def next_lock_deadline(self) -> int | None:
        """The earliest lock deadline of an Acquired record (when :meth:`expire_locks` has work)."""
        deadlines = [
            record.lock_deadline_ms
            for offset, record in self._records.items()
            if record.state is RecordState.ACQUIRED and not self._settling(offset)
        ]
        return min(deadlines) if deadlines else None

    def delivery_complete_count(self) -> int:
        """Offsets at or past the start offset whose delivery is complete (KIP-1226)."""
        return sum(1 for r in self._records.values() if r.state in _DONE)

    def describe(self, log_end_offset: int) -> SharePartitionView:
        counts = dict.fromkeys(RecordState, 0)
        for record in self._records.values():
            counts[record.state] += 1
        done = counts[RecordState.ACKNOWLEDGED] + counts[RecordState.ARCHIVED]
        lag = max(0, log_end_offset - self.start_offset - done)
        return SharePartitionView(
            self.start_offset,
            self.end_offset,
            counts[RecordState.AVAILABLE],
            counts[RecordState.ACQUIRED],
            counts[RecordState.ACKNOWLEDGED],
            counts[RecordState.ARCHIVED],
            lag,
        )

    def state_batches(self) -> list[StateBatch]:
        """The whole window as persisted runs (for a snapshot or a full write)."""
        return self._batches(range(self.start_offset, self.end_offset))

    # -- changing

    def acquire(
        self, member_id: str, first_offset: int, last_offset: int, now_ms: int, max_records: int | None = None
    ) -> list[AcquiredRecords]:
        """Lock for ``member_id`` what it may have of the fetched offsets ``first_offset..last_offset``.

        Available records in the window are acquired again (one more delivery); offsets past the end
        are new (delivery 1) while the window holds fewer than ``partition_max_record_locks``
        records. Offsets between the end and ``first_offset`` (no longer in the log) are archived.
        """
        deadline = now_ms + self._config.record_lock_duration_ms
        limit = max_records if max_records is not None else self._config.partition_max_record_locks
        acquired: list[int] = []
        if first_offset > self.end_offset and not self._skip_to(first_offset):
            return []
        for offset in range(max(first_offset, self.start_offset), last_offset + 1):
            if len(acquired) >= limit:
                break
            record = self._records.get(offset)
            if record is None:
                if self.end_offset - self.start_offset >= self._config.partition_max_record_locks:
                    break
                record = self._records[offset] = _InFlight(RecordState.AVAILABLE, 0)
                self.end_offset = offset + 1
            elif record.state is not RecordState.AVAILABLE:
                continue
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = member_id
            record.lock_deadline_ms = deadline
            acquired.append(offset)
        self._advance_start()
        return self._acquired_runs(acquired)

    def acknowledge(
        self, member_id: str, acknowledgements: Iterable[tuple[int, int, int]], now_ms: int = 0
    ) -> list[StateBatch]:
        """Stage and settle at once (no write to wait for): the changed offsets as persisted runs."""
        self.stage(member_id, acknowledgements, now_ms)
        staged, self._staged = self._staged, {}
        self._settle_all(staged)
        return self._batches(staged)

    def stage(self, member_id: str, acknowledgements: Iterable[tuple[int, int, int]], now_ms: int = 0) -> int:
        """Stage ``(first_offset, last_offset, acknowledge type)`` ranges of one member, all or nothing.

        A renewal (type 4) is not staged: as Kafka's ``SharePartition``, it persists nothing and
        takes effect at once, the record's lock running ``group.share.record.lock.duration.ms`` from
        ``now_ms``. Returns how many offsets were renewed.

        Raises INVALID_REQUEST for a malformed range or type, INVALID_RECORD_STATE for an offset
        outside the window, not Acquired by this member, or already acknowledged and not yet
        settled; nothing changes then."""
        ranges = list(acknowledgements)
        for first, last, kind in ranges:
            if first > last or first < 0 or kind not in AcknowledgeType._value2member_map_:
                raise KafkaError(ErrorCode.invalid_request, f"bad acknowledgement {first}-{last} type {kind}")
            for offset in range(first, last + 1):
                record = self._records.get(offset)
                if record is None:
                    raise KafkaError(ErrorCode.invalid_record_state, f"offset {offset} is not in flight")
                if (
                    record.state is not RecordState.ACQUIRED
                    or record.member_id != member_id
                    or self._settling(offset)
                ):
                    raise KafkaError(
                        ErrorCode.invalid_record_state, f"offset {offset} is not acquired by {member_id}"
                    )
        acknowledged = {
            offset: AcknowledgeType(kind) for first, last, kind in ranges for offset in range(first, last + 1)
        }
        if len(acknowledged) != sum(last - first + 1 for first, last, _ in ranges):
            raise KafkaError(ErrorCode.invalid_request, "an offset is acknowledged twice")
        renewed = [offset for offset, kind in acknowledged.items() if kind is AcknowledgeType.RENEW]
        deadline = now_ms + self._config.record_lock_duration_ms
        for offset in renewed:
            self._records[offset].lock_deadline_ms = deadline
            del acknowledged[offset]
        self._staged.update(acknowledged)
        return len(renewed)

    def has_staged(self) -> bool:
        return bool(self._staged)

    def begin_round(self, changed: Iterable[int] = ()) -> tuple[int, list[StateBatch], int]:
        """Start a write round: the staged acknowledgements join it. Returns (start offset, changed
        runs, delivery-complete count) as they will be once the round's acknowledgements are
        settled; ``changed`` are offsets otherwise changed since the last round (releases, expiries)."""
        if self._writing:
            raise KafkaError(ErrorCode.unknown_server_error, "a write round is already under way")
        self._writing, self._staged = self._staged, {}
        start = self.start_offset
        while start < self.end_offset and self._state_after_round(start) in _DONE:
            start += 1
        done = sum(1 for offset in range(start, self.end_offset) if self._state_after_round(offset) in _DONE)
        offsets = [offset for offset in {*changed, *self._writing} if offset >= start]
        return start, self._batches(offsets, self._state_after_round), done

    def end_round(self, durable: bool) -> dict[AcknowledgeType, int]:
        """The round's write is durable (settle its acknowledgements) or failed (unstage them: their
        records stay Acquired by their member). Returns the settled records by acknowledge type."""
        writing, self._writing = self._writing, {}
        if not durable:
            return {}
        self._settle_all(writing)
        settled: dict[AcknowledgeType, int] = {}
        for kind in writing.values():
            settled[kind] = settled.get(kind, 0) + 1
        return settled

    def expire_locks(self, now_ms: int) -> list[StateBatch]:
        """Locks past their deadline end: their records are Available again (Archived at the limit)."""
        expired = [
            offset
            for offset, record in self._records.items()
            if record.state is RecordState.ACQUIRED
            and record.lock_deadline_ms <= now_ms
            and not self._settling(offset)
        ]
        return self._release(expired)

    def release_member(self, member_id: str) -> list[StateBatch]:
        """The member left (or its share session closed): its acquired records go back."""
        held = [
            offset
            for offset, record in self._records.items()
            if record.state is RecordState.ACQUIRED
            and record.member_id == member_id
            and not self._settling(offset)
        ]
        return self._release(held)

    def reset_start_offset(self, offset: int) -> None:
        """AlterShareGroupOffsets (the group has no member): forget the window, start at ``offset``."""
        if offset < 0:
            raise KafkaError(ErrorCode.invalid_request, f"start offset {offset} is negative")
        self._records.clear()
        self._staged.clear()
        self._writing.clear()
        self.start_offset = self.end_offset = offset

    def advance_to_log_start(self, log_start: int) -> None:
        """Retention removed everything below ``log_start``: nothing below it can be delivered."""
        if log_start <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start, self.end_offset)):
            del self._records[offset]
            self._staged.pop(offset, None)
        self.start_offset = log_start
        self.end_offset = max(self.end_offset, log_start)
        self._advance_start()

    # -- inner workings

    def _settling(self, offset: int) -> bool:
        """Acknowledged, waiting for (or in) a write round: no expiry, release or acknowledgement."""
        return offset in self._staged or offset in self._writing

    def _settle_all(self, acknowledged: dict[int, AcknowledgeType]) -> None:
        for offset, kind in acknowledged.items():
            record = self._records.get(offset)
            if record is not None and record.state is RecordState.ACQUIRED:
                self._settle(record, kind)
        self._advance_start()

    def _state_after_round(self, offset: int) -> RecordState:
        record = self._records[offset]
        kind = self._writing.get(offset)
        if kind is None:
            return record.state
        if kind is AcknowledgeType.ACCEPT:
            return RecordState.ACKNOWLEDGED
        return self._released_state(record) if kind is AcknowledgeType.RELEASE else RecordState.ARCHIVED

    def _settle(self, record: _InFlight, kind: AcknowledgeType) -> None:
        if kind is AcknowledgeType.ACCEPT:
            record.state = RecordState.ACKNOWLEDGED
        elif kind is AcknowledgeType.RELEASE:
            record.state = self._released_state(record)
        else:
            record.state = RecordState.ARCHIVED
        record.member_id = None
        record.lock_deadline_ms = -1

    def _released_state(self, record: _InFlight) -> RecordState:
        if record.delivery_count >= self._config.delivery_count_limit:
            return RecordState.ARCHIVED
        return RecordState.AVAILABLE

    def _release(self, offsets: list[int]) -> list[StateBatch]:
        for offset in offsets:
            self._settle(self._records[offset], AcknowledgeType.RELEASE)
        self._advance_start()
        return self._batches(offsets)

    def _skip_to(self, offset: int) -> bool:
        """Offsets the log no longer has, up to ``offset``: an empty window jumps there; otherwise they
        are archived while the window has room (False: it filled before reaching ``offset``)."""
        if self.start_offset == self.end_offset:
            self.start_offset = self.end_offset = offset
            return True
        while self.end_offset < offset:
            if self.end_offset - self.start_offset >= self._config.partition_max_record_locks:
                self._advance_start()
                return False
            self._records[self.end_offset] = _InFlight(RecordState.ARCHIVED, 0)
            self.end_offset += 1
        return True

    def _advance_start(self) -> None:
        while self.start_offset < self.end_offset and self._records[self.start_offset].state in _DONE:
            del self._records[self.start_offset]
            self.start_offset += 1

    def _batches(
        self, offsets: Iterable[int], state_of: Callable[[int], RecordState] | None = None
    ) -> list[StateBatch]:
        """Runs of consecutive offsets still in the window with the same persisted state and count
        (the state now, or as ``state_of`` gives it; Acquired as Available, one delivery less)."""
        runs: list[StateBatch] = []
        for offset in sorted(set(offsets)):
            record = self._records.get(offset)
            if record is None:
                continue
            state = record.state if state_of is None else state_of(offset)
            count = record.delivery_count
            if state is RecordState.ACQUIRED:  # the delivery under way is not recorded (KIP-932)
                state, count = RecordState.AVAILABLE, count - 1
            last = runs[-1] if runs else None
            if (
                last is not None
                and last.last_offset == offset - 1
                and (last.delivery_state, last.delivery_count) == (state, count)
            ):
                runs[-1] = StateBatch(last.first_offset, offset, int(state), count)
            else:
                runs.append(StateBatch(offset, offset, int(state), count))
        return runs

    def _acquired_runs(self, offsets: list[int]) -> list[AcquiredRecords]:
        runs: list[AcquiredRecords] = []
        for offset in offsets:
            count = self._records[offset].delivery_count
            last = runs[-1] if runs else None
            if last is not None and last.last_offset == offset - 1 and last.delivery_count == count:
                runs[-1] = AcquiredRecords(last.first_offset, offset, count)
            else:
                runs.append(AcquiredRecords(offset, offset, count))
        return runs
