"""Idempotent producers' state across restarts: rebuilt from the log, snapshotted per partition.

As in Kafka's ``ProducerStateManager``, what a partition knows of its idempotent producers is a
function of the batches in its log: every batch header carries the producer id, epoch, base
sequence and offsets. So kcoord *derives* that state by scanning batch headers:

- at start, from the partition's snapshot (the state up to an offset) to the log end, before the
  listener opens; the result is loaded into :class:`ProducerStateManager`, so a batch retried
  across a restart is recognised as a duplicate and answered with its original offset;
- while running, every :data:`SNAPSHOT_INTERVAL_S`, each partition's scan moves on from where it
  stopped by at most :data:`SCAN_BYTES_PER_PASS` (reads from the page cache, headers only
  parsed), and a changed state is written to ``<data dir>/producer-snapshots/<topic>-<partition>``
  in a worker thread (:mod:`kcoord.storage.atomic_file`): the event loop never waits for the disk;
- at a clean stop, every scan runs to the log end and every snapshot is written.

The same scan rebuilds each partition's transactions (:mod:`kcoord.cluster.partition_transactions`):
a transactional batch opens its producer's transaction, a control batch (its marker read with
:func:`~kcoord.cluster.partition_transactions.marker_of_batch`) ends it, and an abort enters the
aborted index; the snapshot keeps the open transactions and the index (from format 2 on; a
format-1 snapshot holds none, as it was written before transactional batches were accepted), and
each producer's last timestamp and last marker's coordinator epoch (for DescribeProducers).
Index entries whose marker fell below the log start (retention, DeleteRecords) are dropped.

A snapshot only bounds the scan at the next start; correctness never depends on it. Its offset
is checked against the log: a snapshot past the log end (the log lost its tail) is ignored and the
partition is scanned from its start. Batches the scan meets at or below a producer's newest known
batch offset are skipped, so rescanning is harmless. A snapshot left behind by a deleted topic may
only hold producer ids that are never issued again (ids are reserved on disk before use).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from kcoord.cluster.loop_slices import LoopSlices
from kcoord.cluster.partition_transactions import AbortedTransaction, PartitionTransactions, marker_of_batch
from kcoord.cluster.producer_state import BATCHES_KEPT, ProducerStateManager, StoredBatch, StoredProducer
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.record_batch import BatchHeader, iter_batches
from kcoord.storage import LogStore, PartitionLog
from kcoord.storage.atomic_file import write_atomically
from kcoord.timer.periodic import PeriodicTask

__all__ = ["SNAPSHOT_DIR", "PartitionScan", "ProducerSnapshots", "resumable"]

log = structlog.get_logger(__name__)

SNAPSHOT_DIR = "producer-snapshots"
SNAPSHOT_INTERVAL_S = 5.0
SCAN_BYTES_PER_PASS = 8 << 20
_READ_BYTES = 1 << 20
_SEQUENCE_MODULUS = 1 << 31
_FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)


class PartitionScan:
    """The producer state a partition's log holds below ``offset``."""

    def __init__(
        self,
        offset: int = 0,
        producers: dict[int, StoredProducer] | None = None,
        transactions: PartitionTransactions | None = None,
    ) -> None:
        self.offset = offset
        self.producers: dict[int, StoredProducer] = producers or {}
        self.transactions = transactions or PartitionTransactions()
        self.changed = False

    def apply(self, header: BatchHeader, data: bytes = b"", position: int = 0) -> None:
        """Take one batch into the state (a batch without a producer id changes nothing);
        ``data`` holds the batch at ``position``, read for a control batch's marker."""
        producer_id = header.producer_id
        if producer_id < 0:
            return
        if header.is_control:
            self._apply_marker(header, data, position)
            return
        if header.base_sequence < 0:
            return
        if header.is_transactional:
            known_epoch = self.producers[producer_id].epoch if producer_id in self.producers else -1
            if header.producer_epoch >= known_epoch and self.transactions.begin(
                producer_id, header.base_offset
            ):
                self.changed = True
        known = self.producers.get(producer_id)
        if known is not None:
            if known.batches and header.base_offset <= known.batches[-1].base_offset:
                return
            if header.producer_epoch < known.epoch:
                return
        if known is None or header.producer_epoch > known.epoch:
            known = StoredProducer(header.producer_epoch, [])
            self.producers[producer_id] = known
        last_sequence = (header.base_sequence + header.last_offset_delta) % _SEQUENCE_MODULUS
        append_time = header.max_timestamp if header.is_log_append_time else -1
        known.batches.append(
            StoredBatch(header.base_sequence, last_sequence, header.base_offset, append_time)
        )
        if len(known.batches) > BATCHES_KEPT:
            del known.batches[0]
        known.last_timestamp = header.max_timestamp
        self.changed = True

    def _apply_marker(self, header: BatchHeader, data: bytes, position: int) -> None:
        marker = marker_of_batch(data, position) if data else None
        if marker is None:
            return
        self.transactions.end(header.producer_id, header.base_offset, marker.committed)
        known = self.producers.get(header.producer_id)
        if known is not None:
            if header.producer_epoch > known.epoch:
                known.epoch, known.batches = header.producer_epoch, []
            known.coordinator_epoch = marker.coordinator_epoch
        self.changed = True

    async def advance(self, partition_log: PartitionLog, max_bytes: int | None) -> bool:
        """Scan from ``offset`` towards the log end, reading at most ``max_bytes`` (None: no bound).

        Returns True when the scan reached the end of the log.
        """
        if self.offset > partition_log.log_end_offset:
            self.offset, self.producers, self.changed = 0, {}, True
            self.transactions = PartitionTransactions()
        if self.transactions.trim_before(partition_log.log_start_offset):
            self.changed = True
        offset = max(self.offset, partition_log.log_start_offset)
        read = 0
        while offset < partition_log.log_end_offset and (max_bytes is None or read < max_bytes):
            data = await partition_log.read_async(offset, _READ_BYTES)
            after = offset
            for position, header in iter_batches(data):
                if header.next_offset <= offset:
                    continue  # already taken (the read began inside this batch)
                self.apply(header, data, position)
                after = header.next_offset
            if after <= offset:
                break
            offset, read = after, read + len(data)
        if offset != self.offset:
            self.offset, self.changed = offset, True
        return offset >= partition_log.log_end_offset


def encode_snapshot(scan: PartitionScan) -> bytes:
    producers = [
        [
            pid,
            p.epoch,
            [[b.first_sequence, b.last_sequence, b.base_offset, b.log_append_time_ms] for b in p.batches],
            p.last_timestamp,
            p.coordinator_epoch,
        ]
        for pid, p in scan.producers.items()
    ]
    document = {
        "version": _FORMAT_VERSION,
        "offset": scan.offset,
        "producers": producers,
        "open_transactions": [[pid, first] for pid, first in scan.transactions.open.items()],
        "aborted": [[a.producer_id, a.first_offset, a.last_offset] for a in scan.transactions.aborted],
    }
    return json.dumps(document).encode()


def decode_snapshot(data: bytes) -> PartitionScan:
    """The scan a snapshot holds; ValueError when it is not a snapshot this version wrote."""
    document: Any = json.loads(data)
    if not isinstance(document, dict) or document.get("version") not in _READABLE_VERSIONS:
        raise ValueError("unknown snapshot format")
    producers: dict[int, StoredProducer] = {}
    for pid, epoch, batches, *described in document["producers"]:
        last_timestamp, coordinator_epoch = described if len(described) == 2 else (-1, -1)
        producers[int(pid)] = StoredProducer(
            int(epoch),
            [StoredBatch(int(f), int(s), int(o), int(t)) for f, s, o, t in batches],
            int(last_timestamp),
            int(coordinator_epoch),
        )
    transactions = PartitionTransactions(
        {int(pid): int(first) for pid, first in document.get("open_transactions", [])},
        [AbortedTransaction(int(p), int(f), int(last)) for p, f, last in document.get("aborted", [])],
    )
    return PartitionScan(int(document["offset"]), producers, transactions)


def resumable(
    saved: PartitionScan | None, topic: str, partition: int, partition_log: PartitionLog
) -> PartitionScan:
    """``saved`` to continue from, or a scan from the log start when there is none or it is past
    the log end (the log lost its tail: logged, as the state it holds may name lost batches)."""
    if saved is None:
        return PartitionScan()
    if saved.offset > partition_log.log_end_offset:
        log.warning(
            "producer_snapshot.past_log_end",
            topic=topic,
            partition=partition,
            snapshot_offset=saved.offset,
            log_end_offset=partition_log.log_end_offset,
        )
        return PartitionScan()
    return saved


class ProducerSnapshots:
    """Keeps a :class:`PartitionScan` per data partition, restores it at start, snapshots it."""

    def __init__(
        self,
        data_dir: Path,
        store: LogStore,
        producers: ProducerStateManager,
        *,
        internal_topics: Iterable[str] = (),
        interval_s: float = SNAPSHOT_INTERVAL_S,
    ) -> None:
        self._dir = Path(data_dir) / SNAPSHOT_DIR
        self._store = store
        self._producers = producers
        self._internal = frozenset(internal_topics)
        self._scans: dict[tuple[str, int], PartitionScan] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcoord-producer-snapshots")
        self._passes = PeriodicTask(
            functools.partial(self.snapshot_all, max_bytes=SCAN_BYTES_PER_PASS),
            interval_s,
            failure_event="producer_snapshot.pass_failed",
        )

    async def _partitions(self) -> list[tuple[str, int, PartitionLog]]:
        """The partitions to scan, listed in slices (100,000 of them take tens of milliseconds)."""
        found = []
        slices = LoopSlices()
        for topic, partition in self._store.partitions():
            partition_log = self._store.get(topic, partition)
            if partition_log is not None and topic not in self._internal:
                found.append((topic, partition, partition_log))
            await slices.pause()
        return found

    async def restore(self) -> None:
        """Rebuild every partition's producer state (snapshot + log tail) into the state manager."""
        loop = asyncio.get_running_loop()
        saved = await loop.run_in_executor(self._executor, self._read_snapshots)
        restored = 0
        for topic, partition, partition_log in await self._partitions():
            scan = resumable(saved.get(f"{topic}-{partition}"), topic, partition, partition_log)
            await scan.advance(partition_log, None)
            self._scans[(topic, partition)] = scan
            self._producers.restore(topic, partition, scan.producers, scan.transactions)
            restored += len(scan.producers)
            await asyncio.sleep(0)
        for name in set(saved) - {f"{topic}-{partition}" for topic, partition in self._scans}:
            await loop.run_in_executor(self._executor, self._remove, name)
        log.info("producer_state.restored", partitions=len(self._scans), producers=restored)

    def start(self) -> None:
        self._passes.start()

    async def stop(self) -> None:
        """Stop the periodic pass, then scan every partition to its end and write its snapshot."""
        await self._passes.stop()
        try:
            await self.snapshot_all(max_bytes=None)
        finally:
            self._executor.shutdown(wait=True)

    async def snapshot_all(self, *, max_bytes: int | None) -> int:
        """One pass: advance every scan (each by at most ``max_bytes``) and write the changed ones."""
        loop = asyncio.get_running_loop()
        live = set()
        written = 0
        for topic, partition, partition_log in await self._partitions():
            key = (topic, partition)
            live.add(key)
            scan = self._scans.setdefault(key, PartitionScan())
            self._producers.trim_aborted(topic, partition, partition_log.log_start_offset)
            try:
                await scan.advance(partition_log, max_bytes)
            except KafkaError:
                continue
            if scan.changed:
                scan.changed = False
                await loop.run_in_executor(
                    self._executor, self._write, f"{topic}-{partition}", encode_snapshot(scan)
                )
                written += 1
            await asyncio.sleep(0)
        for key in set(self._scans) - live:
            del self._scans[key]
            await loop.run_in_executor(self._executor, self._remove, f"{key[0]}-{key[1]}")
        return written

    def _read_snapshots(self) -> dict[str, PartitionScan]:
        found: dict[str, PartitionScan] = {}
        if not self._dir.is_dir():
            return found
        for path in self._dir.glob("*.json"):
            try:
                found[path.stem] = decode_snapshot(path.read_bytes())
            except (OSError, ValueError, TypeError, KeyError) as exc:
                log.warning("producer_snapshot.unreadable", path=str(path), error=repr(exc))
        return found

    def _write(self, name: str, data: bytes) -> None:
        write_atomically(self._dir / f"{name}.json", data)

    def _remove(self, name: str) -> None:
        (self._dir / f"{name}.json").unlink(missing_ok=True)
