"""A kafka-python 3 consume-transform-produce pipeline, exactly once: the loop of
:mod:`tests.transactions.pipeline` (confluent-kafka) with kafka-python's ``KafkaConsumer`` and
transactional ``KafkaProducer``.

One consumer (read_committed, a subscribed group, no auto commit) and one transactional producer: each
polled batch is produced transformed (``out-`` + value) and the consumed offsets are sent to the same
transaction with the consumer's group metadata (KIP-447: generation and member id). A transaction that
fails is aborted, the producer is replaced by a new one with the same ``transactional.id`` (see
:meth:`KafkaPythonPipeline._recover` for why even after a clean abort) and the consumer rewinds to its
group's committed offsets.

kafka-python 3.0.12 can lose a transactional request when kcoord dies (see :class:`StalledCallError`), and
its ``send_offsets_to_transaction``, ``commit_transaction`` and ``abort_transaction`` then wait
forever. The pipeline bounds each of them (:data:`CALL_TIMEOUT_S`) and treats a call that does not
return as a failed transaction, as an application must; each such stall is reported with the
producer's state that shows the lost request.

The committed total it reports is kept locally: the group's committed offsets as read at start and
at each rewind, advanced by each commit that succeeded. Nothing else commits for the group.

``python -m tests.transactions.pipeline_kafka_python BOOTSTRAP SOURCE SINK GROUP TXN_ID PARTITIONS
TOTAL [HOLD_AT]``; the lines it prints are :mod:`tests.transactions.pipeline_process`'s.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from tests.transactions.pipeline_process import (
    READ_COMMITTED_CONSUMER,
    PipelineRun,
    hold_open_transaction,
    hold_points,
    report_done,
    report_progress,
    report_recovered,
)

DEADLINE_MS = 30_000
CALL_TIMEOUT_S = 30.0
"""How long a transactional call may take. kafka-python's own requests time out after 30 s
(``request_timeout_ms``) and are retried; kcoord restarts in a few seconds."""
INIT_ATTEMPTS = 5


class StalledCallError(KafkaError):
    """A transactional call of kafka-python's producer that did not return in time (:func:`bounded`).

    The kafka-python 3.0.12 bug behind it: ``Sender._maybe_send_pending_request``
    (kafka/producer/sender.py) sends each request bound for the transaction or group coordinator after
    ``KafkaNetClient.await_ready`` (kafka/net/compat.py), which raises ``KafkaConnectionError`` when
    the coordinator's node cannot be reached (the sender's ``if not await_ready(...)`` branch, which
    would forget the node and retry, is never taken). The sender's ``except`` branch then looks the
    coordinator up again and breaks out of its loop with ``target_node`` still set, so the
    ``if target_node is None: retry(handler)`` after the loop is skipped: the request
    (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn or InitProducerId) is dropped, never
    sent, and its ``TransactionalRequestResult`` never completes. A kcoord killed just before the
    producer takes such a request from its queue is enough (a Kafka broker restart would do the same).
    The Java producer retries the request there (``Sender.maybeFindCoordinatorAndRetry``)."""

    def __init__(self, call: str, producer: KafkaProducer, timeout_s: float) -> None:
        evidence = lost_request_evidence(producer)
        super().__init__(f"{call} did not return in {timeout_s:.0f} s; {evidence}")


def lost_request_evidence(producer: KafkaProducer) -> str:
    """The producer's transactional state that shows a lost request: what is queued, whether a request
    is in flight, and the partitions still waiting to be added (read from kafka-python's private
    ``TransactionManager``, for the report only)."""
    manager = producer._transaction_manager
    queued = [type(handler.request).__name__ for _, _, handler in manager._pending_requests]
    adding = sorted(map(str, manager._pending_partitions_in_transaction))
    return (
        f"kafka-python has queued {queued}, in flight: {manager.has_in_flight_transactional_request()}, "
        f"partitions awaiting AddPartitionsToTxn: {adding}"
    )


def bounded(
    call: Callable[[], None], name: str, producer: KafkaProducer, timeout_s: float = CALL_TIMEOUT_S
) -> None:
    """Run a blocking kafka-python call of ``producer``, raising :class:`StalledCallError` if it has not
    returned in ``timeout_s`` (a daemon thread is left waiting on the lost request)."""
    failure: list[BaseException] = []
    finished = threading.Event()

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            failure.append(exc)
        finished.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    if not finished.wait(timeout_s):
        raise StalledCallError(name, producer, timeout_s)
    if failure:
        raise failure[0]


class KafkaPythonPipeline:
    def __init__(
        self, bootstrap: str, source: str, sink: str, group: str, transactional_id: str, partitions: int
    ) -> None:
        self.bootstrap, self.sink, self.transactional_id = bootstrap, sink, transactional_id
        self.partitions = [TopicPartition(source, p) for p in range(partitions)]
        self.run = PipelineRun()
        self.consumer = KafkaConsumer(
            source,
            bootstrap_servers=bootstrap,
            group_id=group,
            **READ_COMMITTED_CONSUMER,
        )
        self.producer = self._new_producer()
        self.committed: dict[TopicPartition, int] = {}

    def _new_producer(self) -> KafkaProducer:
        """A producer with its transactions initialised; one whose InitProducerId was lost (see
        :class:`StalledCallError`: ``init_transactions`` then times out after ``max_block_ms``) is closed
        and another one made."""
        for attempt in range(INIT_ATTEMPTS):
            producer = KafkaProducer(
                bootstrap_servers=self.bootstrap,
                transactional_id=self.transactional_id,
                linger_ms=5,
                max_block_ms=DEADLINE_MS,
            )
            try:
                producer.init_transactions()
            except KafkaError as exc:
                self.run.note(f"init_transactions failed: {exc!r}; {lost_request_evidence(producer)}")
                producer.close(timeout=1)
                if attempt == INIT_ATTEMPTS - 1:
                    raise
                continue
            self.run.producers += 1
            return producer
        raise AssertionError("unreachable")

    def copy(self, total: int, within_s: float, hold_at: list[int]) -> PipelineRun:
        """Process until the group's committed offsets cover ``total`` input records, holding the
        transactions at ``hold_at`` open (:func:`hold_open_transaction`)."""
        deadline = time.monotonic() + within_s
        points = sorted(hold_at)
        self.committed = self._read_committed(self.partitions)
        report_progress(self._total())
        while self._total() < total:
            assert time.monotonic() < deadline, (
                f"copied {self._total()} of {total} in {within_s}s: {self.run}"
            )
            batches = self.consumer.poll(timeout_ms=500, max_records=500)
            if not batches:
                continue
            offsets = {tp: records[-1].offset + 1 for tp, records in batches.items() if records}
            hold = bool(points) and self._total() >= points[0]
            if hold:
                points.pop(0)
            try:
                self._transaction(batches, offsets, hold)
            except KafkaError as exc:
                self._recover(exc)
                continue
            self.run.transactions += 1
            self.committed.update(offsets)
            report_progress(self._total())
        return self.run

    def _transaction(
        self, batches: dict[TopicPartition, list[Any]], offsets: dict[TopicPartition, int], hold: bool
    ) -> None:
        """One transaction: the batch transformed, the input offsets sent, the output flushed (a record
        whose partition was never added fails the flush rather than the unbounded commit), commit."""
        producer = self.producer
        producer.begin_transaction()
        for tp, records in batches.items():
            for record in records:
                producer.send(self.sink, value=b"out-" + record.value, partition=tp.partition)
        if hold:
            producer.flush(timeout=DEADLINE_MS / 1000)
            hold_open_transaction(self._total())
        metadata = self.consumer.group_metadata()
        sent = {tp: OffsetAndMetadata(offset, "", -1) for tp, offset in offsets.items()}
        bounded(lambda: producer.send_offsets_to_transaction(sent, metadata), "send_offsets", producer)
        producer.flush(timeout=DEADLINE_MS / 1000)
        bounded(producer.commit_transaction, "commit_transaction", producer)

    def _total(self) -> int:
        return sum(self.committed.get(tp, 0) for tp in self.partitions)

    def _recover(self, exc: KafkaError) -> None:
        """Abort the failed transaction, replace the producer and rewind the consumer.

        The producer is replaced even after a clean abort: kafka-python 3.0.12's
        ``TxnOffsetCommitHandler.handle_response`` (kafka/producer/transaction_manager.py) leaves the
        partitions of a TxnOffsetCommit that failed (or was lost, see :class:`StalledCallError`) in the
        manager's ``_pending_txn_offset_commits``, which nothing clears on abort, and
        ``AddOffsetsToTxnHandler`` sends that whole dict with the next transaction's offsets: a
        partition absent from the next batch would get the aborted batch's offset committed, its
        records never copied. A new producer starts with none."""
        self.run.note(repr(exc))
        try:
            bounded(self.producer.abort_transaction, "abort_transaction", self.producer)
        except KafkaError as again:
            self.run.note(f"abort failed: {again!r}")
        self._replace_producer()
        self.run.aborted += 1
        self._rewind()

    def _replace_producer(self) -> None:
        """Close the producer and start another with the same ``transactional.id``: its
        InitProducerId fences the old one and ends its transaction (an abort, or the commit already
        decided) before the rewind reads the group's offsets."""
        try:
            self.producer.close(timeout=1)
        except KafkaError as exc:
            self.run.note(f"close failed: {exc!r}")
        self.producer = self._new_producer()

    def _rewind(self) -> None:
        """Back to the group's committed offsets: the aborted batch is processed again."""
        assignment = list(self.consumer.assignment())
        committed = self._read_committed(assignment)
        self.committed.update(committed)
        for tp in assignment:
            if tp in committed:
                self.consumer.seek(tp, committed[tp])
            else:
                self.consumer.seek_to_beginning(tp)

    def _read_committed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of ``partitions`` (those it has); asked again while kcoord is
        down."""
        for attempt in range(10):
            try:
                offsets = {tp: self.consumer.committed(tp, timeout_ms=DEADLINE_MS) for tp in partitions}
                return {tp: offset for tp, offset in offsets.items() if offset is not None}
            except KafkaError as exc:
                self.run.note(f"committed offsets unknown: {exc!r}")
                if attempt == 9:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.consumer.close()
        self.producer.close(timeout=5)


def main() -> None:
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(threadName)s %(name)s %(message)s"
    )
    bootstrap, source, sink, group, transactional_id, partitions, total = sys.argv[1:8]
    pipeline = KafkaPythonPipeline(bootstrap, source, sink, group, transactional_id, int(partitions))
    pipeline.run.on_error = report_recovered
    try:
        run = pipeline.copy(int(total), within_s=600, hold_at=hold_points(sys.argv[8:]))
    finally:
        pipeline.close()
    report_done(run)


if __name__ == "__main__":
    main()
