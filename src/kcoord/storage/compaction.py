"""Log compaction (``cleanup.policy=compact``): keep the latest record per key, offsets unchanged.

This is what keeps ``__consumer_offsets`` from growing forever. A pass, after Kafka's LogCleaner:

1. Plan (on the loop, :func:`plan_compaction`): the cleanable segments are the closed ones from
   the log start, up to the first with writes still pending, the first reaching the partition's
   first unstable offset (its oldest open transaction, as Kafka's cleaner stops at the last
   stable offset) or, under ``min.compaction.lag.ms``, the first holding a record that recent.
   The active segment is never cleaned. Those from the first segment the previous pass did not
   cover are *dirty*; the rest were cleaned before.
2. Map (in a thread): key -> latest offset over the dirty segments.
3. Rewrite (in a thread, :func:`clean_segments`): every cleanable segment, the clean part too,
   keeps a record when no later offset holds its key (a key missing from the map was already
   deduplicated). A tombstone (null value) that survives is stamped with a delete horizon,
   now + ``delete.retention.ms``, in its batch header (KIP-534: attribute bit 6, base timestamp);
   a later pass past that horizon drops it. Records without a key are dropped, as Kafka does.
4. Swap (on the loop, appends held back): the engine replaces each old segment by its cleaned
   copy, same base offset, atomically (see :mod:`kcoord.storage.file_compaction`). A segment
   left empty is deleted, except the first, whose base offset is the log start offset.

Batches: a batch whose records all survive (and that needs no new delete horizon) is kept byte
for byte; one that loses records is rebuilt from the survivors, one batch for one batch (base
offset = first survivor's, offsets and timestamps kept, producer fields kept, new CRC-32C). A
compressed batch is decompressed to read its keys (see :mod:`kcoord.storage.compaction_records`)
and, when it loses records, rebuilt *uncompressed*: the cleaner never re-compresses. Control
batches, transactional batches not known to be committed (below), and batches whose codec is
unavailable here, are kept as they are and their keys stay unknown; so that dropping a tombstone
can never uncover an older value hidden in such a batch, no tombstone after one of them is dropped.

Transactions, after Kafka's cleaner (``LogCleaner.cleanInto`` with its aborted-transaction
tracking): a first read of the cleanable segments finds every transaction marker (control batch)
in them. A transactional data batch whose producer's next marker after it is an abort is removed
whole: an aborted transaction's records never reach anyone once compacted (read_uncommitted
consumers included, as in Kafka). A transactional batch whose transaction committed is compacted
like any batch (its records count in the key map, and a rebuilt one keeps its producer fields and
transactional attribute); one whose marker is not in the cleanable range (its transaction still
open, or its marker in the active segment) is kept as it is, its keys unknown. Markers are always
kept, so no marker ever goes while data of its transaction remains (Kafka also removes a marker
once its transaction's data is gone and its delete horizon has passed; kcoord keeps it: a few
bytes per transaction and partition).

Offsets are never renumbered, so a compacted log has gaps: reads return the next batch after a
removed offset, and segment indexes are rebuilt for the rewritten segments.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kcoord.protocol.control_batch import read_control_record
from kcoord.protocol.plain_batch import CorruptBatchError, iter_plain_records
from kcoord.protocol.record_batch import BatchHeader, iter_batches
from kcoord.storage.compaction_records import (
    DELETE_HORIZON_FLAG,
    CleanableRecord,
    decode_records,
    encode_batch,
)
from kcoord.storage.segment import Segment, SegmentData, scan_segment

__all__ = [
    "CleanedLog",
    "CompactionPlan",
    "SegmentReader",
    "SegmentStager",
    "Swap",
    "clean_segments",
    "plan_compaction",
]

SegmentReader = Callable[[], bytes]
"""Returns a closed segment's bytes; safe to call in a worker thread."""
SegmentStager = Callable[[Segment, bytes, Segment], SegmentData]
"""(old segment, cleaned bytes, rebuilt segment) -> where the rebuilt segment's bytes will live.

Blocking: stores the cleaned copy beside the old segment without replacing it yet.
"""
Swap = tuple[Segment, Segment | None]
"""An old segment and its cleaned replacement, or None when it is to be deleted."""


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    segments: list[Segment]
    """The segments to rewrite, from the log start."""
    first_dirty: int
    """Index in ``segments`` of the first dirty one (``len(segments)`` when none is)."""
    end: Segment
    """The first segment left alone; where the next pass's dirty part begins."""
    dirty_ratio: float


@dataclass(frozen=True, slots=True)
class CleanedLog:
    swaps: list[Swap]
    records_before: int
    records_after: int
    bytes_before: int
    bytes_after: int
    next_delete_horizon_ms: int | None
    """The earliest delete horizon of a tombstone kept, when one was."""


def plan_compaction(
    segments: Sequence[Segment],
    first_dirty_segment: Segment | None,
    now_ms: int,
    min_compaction_lag_ms: int,
    *,
    first_unstable_offset: int | None = None,
) -> CompactionPlan | None:
    """What a pass would clean now, or None when no closed segment is cleanable."""
    count = 0
    for segment in segments[:-1]:
        if segment.size != segment.assigned_size:
            break
        if first_unstable_offset is not None and segment.next_offset > first_unstable_offset:
            break
        if min_compaction_lag_ms > 0 and segment.max_timestamp > now_ms - min_compaction_lag_ms:
            break
        count += 1
    if count == 0:
        return None
    known = [i for i, segment in enumerate(segments) if segment is first_dirty_segment]
    first_dirty = min(known[0], count) if known else 0
    cleanable = list(segments[:count])
    total = sum(segment.size for segment in cleanable)
    dirty = sum(segment.size for segment in cleanable[first_dirty:])
    return CompactionPlan(cleanable, first_dirty, segments[count], dirty / total if total else 0.0)


def clean_segments(
    plan: CompactionPlan,
    readers: Sequence[SegmentReader],
    *,
    now_ms: int,
    delete_retention_ms: int,
    index_interval_bytes: int,
    stage: SegmentStager,
    discard: Callable[[list[Swap]], None],
) -> CleanedLog:
    """Steps 2 and 3 of a pass (blocking: run it in a thread). ``discard`` undoes staging on failure."""
    ends = _TransactionEnds()
    for read in readers:
        ends.add_markers(read())
    offset_map: dict[bytes, int] = {}
    for read in readers[plan.first_dirty :]:
        _add_latest_offsets(read(), offset_map, ends)
    cleaner = _Cleaner(offset_map, now_ms, delete_retention_ms, ends)
    swaps: list[Swap] = []
    bytes_before = bytes_after = 0
    try:
        for i, (segment, read) in enumerate(zip(plan.segments, readers, strict=True)):
            source = read()
            cleaned = cleaner.clean(source)
            bytes_before += len(source)
            bytes_after += len(cleaned)
            if not cleaned and i > 0:
                swaps.append((segment, None))
                continue
            rebuilt = _rebuild_segment(segment, cleaned, index_interval_bytes)
            rebuilt.data = stage(segment, cleaned, rebuilt)
            swaps.append((segment, rebuilt))
    except BaseException:
        discard(swaps)
        raise
    return CleanedLog(
        swaps,
        records_before=cleaner.records_before,
        records_after=cleaner.records_after,
        bytes_before=bytes_before,
        bytes_after=bytes_after,
        next_delete_horizon_ms=cleaner.next_horizon,
    )


def _decodable(
    batch: memoryview, header: BatchHeader, ends: _TransactionEnds
) -> list[CleanableRecord] | None:
    """The batch's records, or None when the cleaner must keep it as it is (a marker, or data of a
    transaction not known to be committed)."""
    if header.is_control or (header.is_transactional and not ends.committed(header)):
        return None
    try:
        return decode_records(batch, header)
    except Exception:  # malformed records or a codec's own error type: keep the batch untouched
        return None


def _add_latest_offsets(data: bytes, offset_map: dict[bytes, int], ends: _TransactionEnds) -> None:
    view = memoryview(data)
    for pos, header in iter_batches(view):
        for record in _decodable(view[pos : pos + header.size], header, ends) or ():
            if record.key is not None:
                offset_map[record.key] = record.offset


@dataclass(slots=True)
class _TransactionEnds:
    """Every producer's markers in the cleanable segments: offsets (ascending) and whether each commits."""

    offsets: dict[int, list[int]] = field(default_factory=dict)
    commits: dict[int, list[bool]] = field(default_factory=dict)

    def add_markers(self, data: bytes) -> None:
        for pos, header in iter_batches(data):
            if not header.is_control or header.producer_id < 0:
                continue
            committed = _marker_commits(data, pos)
            if committed is None:
                continue
            self.offsets.setdefault(header.producer_id, []).append(header.base_offset)
            self.commits.setdefault(header.producer_id, []).append(committed)

    def aborted(self, header: BatchHeader) -> bool:
        """Whether the transactional data batch ``header`` belongs to a transaction whose marker,
        the producer's first after it, aborts it."""
        return self._outcome(header) is False

    def committed(self, header: BatchHeader) -> bool:
        """Whether that marker commits it."""
        return self._outcome(header) is True

    def _outcome(self, header: BatchHeader) -> bool | None:
        offsets = self.offsets.get(header.producer_id)
        if not offsets:
            return None
        at = bisect.bisect_right(offsets, header.base_offset)
        return self.commits[header.producer_id][at] if at < len(offsets) else None


def _marker_commits(data: bytes, pos: int) -> bool | None:
    """True for a commit marker at ``pos``, False for an abort, None for anything else."""
    try:
        for _, key, value in iter_plain_records(data, pos):
            record = read_control_record(key, value)
            if record is not None:
                return record.committed
    except (CorruptBatchError, NotImplementedError):
        return None
    return None


class _Cleaner:
    """Takes the dead records out of segments fed to it in offset order."""

    def __init__(
        self,
        offset_map: dict[bytes, int],
        now_ms: int,
        delete_retention_ms: int,
        ends: _TransactionEnds | None = None,
    ) -> None:
        self.offset_map = offset_map
        self.ends = ends or _TransactionEnds()
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.records_before = 0
        self.records_after = 0
        self.next_horizon: int | None = None
        self.opaque_seen = False
        """Once a data batch with unreadable keys is passed, no later tombstone may go: it might be
        all that hides an older value of its key in that batch."""

    def clean(self, data: bytes) -> bytes:
        kept: list[bytes | memoryview] = []
        view = memoryview(data)
        for pos, header in iter_batches(view):
            batch = view[pos : pos + header.size]
            if header.is_transactional and not header.is_control and self.ends.aborted(header):
                self.records_before += header.record_count
                continue
            records = _decodable(batch, header, self.ends)
            if records is None:
                self.opaque_seen = self.opaque_seen or not header.is_control
                self.records_before += header.record_count
                self.records_after += header.record_count
                kept.append(batch)
                continue
            old_horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_FLAG else None
            live = [r for r in records if self._is_live(r, old_horizon)]
            self.records_before += len(records)
            self.records_after += len(live)
            if not live:
                continue
            horizon = None
            if any(r.tombstone for r in live):
                horizon = old_horizon if old_horizon is not None else self.now_ms + self.delete_retention_ms
                if old_horizon is None or self.now_ms < old_horizon:
                    # (Tombstones past their horizon live on only behind an unreadable batch;
                    # waiting longer will not free them, so they do not schedule a pass.)
                    self.next_horizon = (
                        horizon if self.next_horizon is None else min(self.next_horizon, horizon)
                    )
            if len(live) == len(records) and horizon == old_horizon:
                kept.append(batch)
            else:
                kept.append(encode_batch(header, live, delete_horizon_ms=horizon))
        return b"".join(kept)

    def _is_live(self, record: CleanableRecord, horizon: int | None) -> bool:
        if record.key is None:
            return False
        latest = self.offset_map.get(record.key)
        if latest is not None and latest > record.offset:
            return False
        expired = record.tombstone and horizon is not None and self.now_ms >= horizon
        return not expired or self.opaque_seen


class _Bytes:
    """Cleaned bytes as segment data, to rebuild indexes before they are stored anywhere."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def read_at(self, position: int, size: int) -> bytes:
        return self._data[position : position + size]


def _rebuild_segment(source: Segment, data: bytes, index_interval_bytes: int) -> Segment:
    """The cleaned segment's state: indexes as a scan builds them, sealed, same offset range."""
    rebuilt = scan_segment(
        source.base_offset,
        _Bytes(data),
        len(data),
        index_interval_bytes=index_interval_bytes,
        created_ms=source.created_ms,
        verify_crc=False,
    )
    if rebuilt.size != len(data):
        raise RuntimeError(f"cleaned segment {source.base_offset} does not scan whole")
    seal_entry = rebuilt.seal()
    if seal_entry is not None:
        rebuilt.add_time_entry(seal_entry)
    rebuilt.next_offset = source.next_offset
    return rebuilt
