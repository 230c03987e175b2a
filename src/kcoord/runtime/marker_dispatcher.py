"""Writes a transaction's commit or abort markers once its decision is durable, then completes it.

The transaction coordinator's shard decides (PrepareCommit/PrepareAbort) and returns the markers
to write (:class:`~kcoord.coordinator.transactions.TxnMarker`); the runtime hands them here only
after the decision's record is durable. Every marker goes to one
:class:`~kcoord.coordinator.transactions.MarkerWriter`; the app's is
``kcoord.cluster.marker_routing``' ``RoutingMarkerWriter``, which writes a data partition's marker
with ``kcoord.cluster.transaction_markers``' ``DataMarkerWriter`` on the partition's owner and an
offsets partition's (a TxnOffsetCommit's) with that owner's group coordinator (``write_end_marker``,
serial with the partition's other operations).

The markers of one transaction are written concurrently; a retriable answer (the partition is
moving, loading, or timed out) is retried with a growing backoff, as Kafka's
``TransactionMarkerChannelManager`` retries. Two answers end a marker without writing it, as in
Kafka: the partition no longer exists (UNKNOWN_TOPIC_OR_PARTITION) or a newer epoch of the
producer wrote there (INVALID_PRODUCER_EPOCH / PRODUCER_FENCED: a later marker superseded it).
A marker refused with TRANSACTION_COORDINATOR_FENCED (a newer coordinator of the id, one with a
higher coordinator epoch, wrote there) stops its transaction here without completing it, as
Kafka's coordinator abandons it: the newer coordinator completes it.
When every marker of a transaction is done, ``complete`` is called: the coordinator writes
CompleteCommit/CompleteAbort. A transaction whose coordinator partition moved away stops being
retried here (``still_coordinating``); its new coordinator completes it at load.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from kcoord.coordinator.transactions import MarkerWriter, TxnMarker
from kcoord.protocol.errors import ErrorCode

__all__ = ["MarkerDispatcher", "TransactionKey"]

log = structlog.get_logger(__name__)

_BACKOFF_MIN_S = 0.05
_BACKOFF_MAX_S = 2.0
_SUPERSEDED = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced})
"""A newer epoch of the producer wrote to the partition: this marker is moot (Kafka drops it)."""
_GONE = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_topic_exception})


@dataclass(frozen=True, slots=True)
class TransactionKey:
    """One decision whose markers are written together."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


class MarkerDispatcher:
    """Writes markers (one task per transaction) and reports each transaction whose markers are done."""

    def __init__(
        self,
        writer: MarkerWriter | None,
        complete: Callable[[TransactionKey], None],
        *,
        still_coordinating: Callable[[str], bool] = lambda transactional_id: True,
        coordinator_epoch: Callable[[str], int] = lambda transactional_id: 0,
    ) -> None:
        self.writer = writer
        self._complete = complete
        self._still_coordinating = still_coordinating
        self._coordinator_epoch = coordinator_epoch
        self._tasks: dict[TransactionKey, asyncio.Task[None]] = {}
        self.retries = 0
        """Marker writes answered with a retriable error and tried again (all transactions)."""

    @property
    def in_flight(self) -> int:
        """Transactions whose markers are being written."""
        return len(self._tasks)

    def writing(self, transactional_id: str) -> list[asyncio.Task[None]]:
        """The tasks writing markers of ``transactional_id``'s decisions (none when all are done)."""
        return [task for key, task in self._tasks.items() if key.transactional_id == transactional_id]

    def dispatch(self, markers: Iterable[TxnMarker]) -> None:
        """Start writing ``markers`` (their decisions are durable); a transaction already under way is
        left to its own task."""
        by_transaction: dict[TransactionKey, list[TxnMarker]] = {}
        for marker in markers:
            key = TransactionKey(
                marker.transactional_id, marker.producer_id, marker.producer_epoch, marker.committed
            )
            by_transaction.setdefault(key, []).append(marker)
        loop = asyncio.get_running_loop()
        for key, its_markers in by_transaction.items():
            if key in self._tasks:
                continue
            task = loop.create_task(self._write_all(key, its_markers))
            self._tasks[key] = task
            task.add_done_callback(functools.partial(self._finished, key))

    def _finished(self, key: TransactionKey, _: asyncio.Task[None]) -> None:
        self._tasks.pop(key, None)

    async def _write_all(self, key: TransactionKey, markers: list[TxnMarker]) -> None:
        epoch = self._coordinator_epoch(key.transactional_id)
        written = await asyncio.gather(*(self._write_one(marker, epoch) for marker in markers))
        if not all(written):
            return
        if not self._still_coordinating(key.transactional_id):
            return
        log.debug("transaction.markers_written", transactional_id=key.transactional_id, markers=len(markers))
        self._complete(key)

    async def _write_one(self, marker: TxnMarker, coordinator_epoch: int) -> bool:
        """Write one marker, retrying; False when the transaction's coordinator partition moved away
        (or a newer coordinator fenced this one)."""
        delay = _BACKOFF_MIN_S
        marker_log = log.bind(
            transactional_id=marker.transactional_id,
            topic=marker.partition.topic,
            partition=marker.partition.partition,
        )
        while True:
            try:
                error = await self._write(marker, coordinator_epoch)
            except Exception as exc:  # a writer's bug or its storage failing: logged, retried
                log.warning(
                    "transaction.marker_write_failed", partition=str(marker.partition), error=repr(exc)
                )
                error = ErrorCode.unknown_server_error
            if error is ErrorCode.none:
                return True
            if error in _SUPERSEDED or error in _GONE:
                marker_log.info("transaction.marker_dropped", error=error.name)
                return True
            if error is ErrorCode.transaction_coordinator_fenced:
                marker_log.info("transaction.coordinator_fenced", coordinator_epoch=coordinator_epoch)
                return False
            if not self._still_coordinating(marker.transactional_id):
                return False
            self.retries += 1
            marker_log.debug("transaction.marker_retry", error=error.name, retry_in_ms=round(delay * 1000))
            await asyncio.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX_S)

    async def _write(self, marker: TxnMarker, coordinator_epoch: int) -> ErrorCode:
        if self.writer is None:
            return ErrorCode.coordinator_not_available
        return await self.writer.write_marker(marker, coordinator_epoch)

    async def stop(self) -> None:
        """Stop writing (the decisions stay in the log: the next load completes them)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
