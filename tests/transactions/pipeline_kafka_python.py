"""A kafka-python 3 consume-transform-produce pipeline, exactly once: the loop of
:mod:`tests.transactions.pipeline` (confluent-kafka) with kafka-python's ``KafkaConsumer`` and
transactional ``KafkaProducer``.

One consumer (read_committed, a subscribed group, no auto commit) and one transactional producer: each
polled batch is produced transformed (``out-`` + value) and the consumed offsets are sent to the same
transaction with the consumer's group metadata (KIP-447: generation and member id). A transaction that
fails is aborted and the consumer rewinds to its group's committed offsets; a producer that cannot
abort (fenced, say) is closed and replaced by a new one with the same ``transactional.id``.

The committed total it reports is kept locally: the group's committed offsets as read at start and
at each rewind, advanced by each commit that succeeded. Nothing else commits for the group.

``python -m tests.transactions.pipeline_kafka_python BOOTSTRAP SOURCE SINK GROUP TXN_ID PARTITIONS
TOTAL [HOLD_AT]``; the lines it prints are :mod:`tests.transactions.pipeline_process`'s.
"""

from __future__ import annotations

import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from tests.transactions.pipeline_process import (
    PipelineRun,
    hold_open_transaction,
    hold_points,
    report_done,
    report_progress,
    report_recovered,
)

DEADLINE_MS = 30_000


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
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
        )
        self.producer = self._new_producer()
        self.committed: dict[TopicPartition, int] = {}

    def _new_producer(self) -> KafkaProducer:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, transactional_id=self.transactional_id, linger_ms=5
        )
        producer.init_transactions()
        self.run.producers += 1
        return producer

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
            try:
                self.producer.begin_transaction()
                for tp, records in batches.items():
                    for record in records:
                        self.producer.send(self.sink, value=b"out-" + record.value, partition=tp.partition)
                if points and self._total() >= points[0]:
                    points.pop(0)
                    self.producer.flush(timeout=DEADLINE_MS / 1000)
                    hold_open_transaction(self._total())
                self.producer.send_offsets_to_transaction(
                    {tp: OffsetAndMetadata(offset, "", -1) for tp, offset in offsets.items()},
                    self.consumer.group_metadata(),
                )
                self.producer.commit_transaction()
            except KafkaError as exc:
                self._recover(exc)
                continue
            self.run.transactions += 1
            self.committed.update(offsets)
            report_progress(self._total())
        return self.run

    def _total(self) -> int:
        return sum(self.committed.get(tp, 0) for tp in self.partitions)

    def _recover(self, exc: KafkaError) -> None:
        self.run.note(repr(exc))
        try:
            self.producer.abort_transaction()
        except KafkaError as again:
            self.run.note(f"abort failed: {again!r}")
            self.producer.close(timeout=1)
            self.producer = self._new_producer()
        self.run.aborted += 1
        self._rewind()

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
