"""Idempotent producers' state moving with a topic partition from node to node of a cluster.

A partition's producer state is a function of its log (:mod:`kcoord.cluster.producer_snapshots`),
and the log lives in PostgreSQL, so the node that claims a partition rebuilds the state itself,
as a Kafka broker becoming leader has it from its replica of the log:

1. on claim (:meth:`ProducerHandover.host_for` is the membership's :class:`PartitionHost` for
   topic partitions), read the partition's snapshot from ``producer_snapshots``, scan the log
   from the snapshot's offset to its end (headers only, yielding to the loop between chunks),
   and load the result into :class:`ProducerStateManager`, which until then answers the
   partition's idempotent batches NOT_LEADER_OR_FOLLOWER (the producer retries them);
2. while it owns the partition, every :data:`SNAPSHOT_INTERVAL_S` move each scan on by at most
   :data:`SCAN_BYTES_PER_PASS` and write a changed snapshot under the owner epoch (a fenced node's
   write is a no-op), so the next owner scans only a short tail;
3. on release, fencing or step-down, drop the state: it is the next owner's now.

The partition's open transactions and aborted index come with the same scan, so the last stable
offset and read_committed Fetch are right on the new owner from the first request it serves.

A retry of a batch the previous owner stored (but whose answer the producer never saw) is thus
recognised as a duplicate and answered with its original offset, and sequence gaps are still
refused. A missing or unreadable snapshot only makes the scan longer: correctness never depends on
it. The scan sees only committed batches, and the previous owner can commit nothing after the claim
(its rounds are fenced by the epoch), so the state loaded is the whole state of the log.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import structlog

from kcoord.cluster.producer_snapshots import (
    SCAN_BYTES_PER_PASS,
    SNAPSHOT_INTERVAL_S,
    PartitionScan,
    decode_snapshot,
    encode_snapshot,
    resumable,
)
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.protocol.errors import KafkaError
from kcoord.storage.api import PartitionLog
from kcoord.storage.postgres.log import PostgresLog
from kcoord.storage.postgres.producer_snapshots import PostgresProducerSnapshots
from kcoord.timer.periodic import PeriodicTask

__all__ = ["ProducerHandover"]

log = structlog.get_logger(__name__)


@dataclass(slots=True, eq=False)
class _Served:
    """A partition this node serves: its log and the scan of that log's producer state."""

    partition_log: PartitionLog
    scan: PartitionScan


class _TopicHost:
    """The membership's host for the partitions of one topic."""

    def __init__(self, handover: ProducerHandover, topic: str) -> None:
        self._handover = handover
        self._topic = topic

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None:
        await self._handover.acquire(self._topic, partition, partition_log)

    async def release(self, partition: int) -> None:
        self._handover.release(self._topic, partition)


class ProducerHandover:
    """Rebuilds producer state on claim, snapshots it to PostgreSQL while owned, drops it on release."""

    def __init__(
        self,
        producers: ProducerStateManager,
        snapshots: PostgresProducerSnapshots,
        *,
        interval_s: float = SNAPSHOT_INTERVAL_S,
    ) -> None:
        self._producers = producers
        self._snapshots = snapshots
        self._served: dict[tuple[str, int], _Served] = {}
        self._passes = PeriodicTask(
            self.snapshot_all, interval_s, failure_event="producer_snapshot.pass_failed"
        )

    def host_for(self, topic: str) -> _TopicHost:
        return _TopicHost(self, topic)

    def serving(self) -> list[tuple[str, int]]:
        """The partitions whose producer state is loaded here (for tests and status)."""
        return sorted(self._served)

    # 1. Claim

    async def acquire(self, topic: str, partition: int, partition_log: PartitionLog) -> None:
        """Rebuild ``topic``-``partition``'s producer state from its snapshot and log tail, then
        open it to idempotent batches."""
        started = time.perf_counter()
        self.release(topic, partition)
        scan = await self._saved_scan(topic, partition, partition_log)
        from_offset = scan.offset
        try:
            # Until the end, or until no further batch is readable: what is past it is still
            # being appended, and no idempotent batch can be (they wait for this load).
            while True:
                before = scan.offset
                if await scan.advance(partition_log, SCAN_BYTES_PER_PASS) or scan.offset == before:
                    break
                await asyncio.sleep(0)
        except KafkaError as exc:
            # The log was fenced or closed under the scan: the membership drops the partition.
            log.warning("producer_state.load_failed", topic=topic, partition=partition, error=str(exc))
            return
        scan.changed = scan.offset != from_offset  # the next pass stores the tail it scanned
        self._producers.restore(topic, partition, scan.producers, scan.transactions)
        self._served[(topic, partition)] = _Served(partition_log, scan)
        log.info(
            "producer_state.loaded",
            topic=topic,
            partition=partition,
            producers=len(scan.producers),
            snapshot_offset=from_offset,
            log_end_offset=scan.offset,
            load_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    async def _saved_scan(self, topic: str, partition: int, partition_log: PartitionLog) -> PartitionScan:
        """The stored snapshot as a scan to continue, or a scan from the log start."""
        try:
            data = await self._snapshots.read(topic, partition)
            saved = None if data is None else decode_snapshot(data)
        except (KafkaError, ValueError, TypeError, KeyError) as exc:
            log.warning("producer_snapshot.unreadable", topic=topic, partition=partition, error=str(exc))
            return PartitionScan()
        return resumable(saved, topic, partition, partition_log)

    # 3. Release

    def release(self, topic: str, partition: int) -> None:
        """Forget ``topic``-``partition``'s producer state: this node no longer serves it."""
        self._served.pop((topic, partition), None)
        self._producers.drop_partition(topic, partition)

    # 2. Snapshots while owned

    def start(self) -> None:
        self._passes.start()

    async def stop(self) -> None:
        await self._passes.stop()

    async def snapshot_all(self) -> int:
        """One pass: advance every served partition's scan and store the changed snapshots."""
        written = 0
        for key, served in list(self._served.items()):
            scan, partition_log = served.scan, served.partition_log
            self._producers.trim_aborted(key[0], key[1], partition_log.log_start_offset)
            try:
                await scan.advance(partition_log, SCAN_BYTES_PER_PASS)
            except KafkaError:
                continue
            if not scan.changed or not isinstance(partition_log, PostgresLog):
                continue
            scan.changed = False
            try:
                stored = await self._snapshots.write(
                    key[0], key[1], partition_log.owner_epoch, scan.offset, encode_snapshot(scan)
                )
            except KafkaError as exc:
                scan.changed = True
                log.warning("producer_snapshot.write_failed", topic=key[0], partition=key[1], error=str(exc))
                continue
            if stored:
                written += 1
            await asyncio.sleep(0)
        return written
