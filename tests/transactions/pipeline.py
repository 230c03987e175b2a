"""A confluent-kafka consume-transform-produce pipeline, exactly once (Kafka's EOS loop, KIP-447 style).

One consumer (read_committed, a group, no auto commit) and one transactional producer: each batch
of input records is produced transformed (``out-`` + value) and the consumer's positions are
committed inside the same transaction (``send_offsets_to_transaction``). When a transaction
cannot commit it is aborted and the consumer rewinds to its group's committed offsets, so the
batch is processed again; a producer that became fatal (fenced, say) is replaced by a new one with
the same ``transactional.id``. ``interrupt`` is called in the middle of chosen transactions
(after their records are flushed, before the commit): the tests kill kcoord or the pipeline there.

Both clients set ``metadata.recovery.strategy=none``. librdkafka 2.10+ "re-bootstraps" when every
broker it knows is down (KIP-899): it decommissions the broker handles and starts over from the
bootstrap list. With a single node that is killed and restarted on the same address, that
decommission leaves a pending ``send_offsets_to_transaction`` waiting on a handle that never
finishes terminating (seen in librdkafka 2.16's ``eos`` debug log: "Decommissioning 1 broker(s):
re-bootstrap", then "Handle is terminating in state INIT" forever, and the API call outlives its
own timeout). Without re-bootstrap the client reconnects to the same node, which is all a
single node needs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from tests.transactions.pipeline_process import (
    PipelineRun,
    hold_open_transaction,
    hold_points,
    report_done,
    report_progress,
    report_recovered,
)

DEADLINE_S = 30.0
NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}


@dataclass
class ConfluentRun(PipelineRun):
    interruptions: int = 0
    """How many times ``interrupt`` ran (each in the middle of a transaction)."""


class Pipeline:
    def __init__(
        self, bootstrap: str, source: str, sink: str, group: str, transactional_id: str, partitions: int
    ) -> None:
        self.bootstrap = bootstrap
        self.source, self.sink = source, sink
        self.partitions = partitions
        self.transactional_id = transactional_id
        self.run = ConfluentRun()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                **NO_REBOOTSTRAP,
            }
        )
        self.consumer.subscribe([source])
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.transactional_id,
                "linger.ms": 5,
                **NO_REBOOTSTRAP,
            }
        )
        producer.init_transactions(DEADLINE_S)
        self.run.producers += 1
        return producer

    def copy(
        self,
        total: int,
        *,
        batch: int = 500,
        interrupt_at: Sequence[int] = (),
        interrupt: Callable[[int], object] = lambda committed: None,
        within_s: float = 180.0,
        on_progress: Callable[[int], None] = lambda committed: None,
    ) -> ConfluentRun:
        """Process until the group's committed offsets cover ``total`` input records; ``on_progress``
        hears each new committed total. ``interrupt(committed)`` runs once per point of ``interrupt_at``,
        in the first transaction that starts at or past it, once its records are flushed and before
        its commit."""
        deadline = time.monotonic() + within_s
        committed = self._committed_or(0)
        on_progress(committed)
        points = sorted(interrupt_at)
        while committed < total:
            assert time.monotonic() < deadline, f"copied {committed} of {total} in {within_s}s: {self.run}"
            messages = [m for m in self.consumer.consume(batch, 0.5) if m.error() is None]
            if not messages:
                continue
            try:
                self.producer.begin_transaction()
                for message in messages:
                    self.producer.produce(
                        self.sink, value=b"out-" + bytes(message.value()), partition=message.partition()
                    )
                if points and committed >= points[0]:
                    points.pop(0)
                    self.run.interruptions += 1
                    self.producer.flush(DEADLINE_S)
                    interrupt(committed)
                self._commit()
                self.run.transactions += 1
            except KafkaException as exc:
                self._recover(exc)
            known, committed = committed, self._committed_or(committed)
            if committed != known:
                on_progress(committed)
        return self.run

    def _commit(self) -> None:
        positions = self.consumer.position(self.consumer.assignment())
        metadata = self.consumer.consumer_group_metadata()
        self.producer.send_offsets_to_transaction(positions, metadata, DEADLINE_S)
        for attempt in range(5):
            try:
                self.producer.commit_transaction(DEADLINE_S)
                return
            except KafkaException as exc:
                error = exc.args[0]
                if not error.retriable() or attempt == 4:
                    raise
                self.run.note(f"commit retried: {error}")

    def _recover(self, exc: KafkaException) -> None:
        error = exc.args[0]
        self.run.note(str(error))
        if error.txn_requires_abort():
            try:
                self.producer.abort_transaction(DEADLINE_S)
            except KafkaException as again:
                self.run.note(f"abort failed: {again.args[0]}")
                self.producer = self._new_producer()
        else:
            self.producer = self._new_producer()
        self.run.aborted += 1
        self._rewind()

    def _committed_or(self, known: int) -> int:
        try:
            return self.committed_total()
        except KafkaException as exc:  # kcoord is down: known again once it is back
            self.run.note(f"committed offsets unknown: {exc.args[0]}")
            return known

    def _rewind(self) -> None:
        """Back to the group's committed offsets: the aborted batch is processed again."""
        assignment = self.consumer.assignment()
        for attempt in range(10):
            try:
                committed = self.consumer.committed(assignment, DEADLINE_S)
                break
            except KafkaException as exc:  # kcoord is down: asked again once it is back
                self.run.note(f"rewind retried: {exc.args[0]}")
                if attempt == 9:
                    raise
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))

    def committed_total(self) -> int:
        """Input records the group has committed, over every partition of the source."""
        partitions = [TopicPartition(self.source, p) for p in range(self.partitions)]
        committed = self.consumer.committed(partitions, DEADLINE_S)
        return sum(max(tp.offset, 0) for tp in committed)

    def close(self) -> None:
        self.consumer.close()


def main() -> None:
    """``python -m tests.transactions.pipeline BOOTSTRAP SOURCE SINK GROUP TXN_ID PARTITIONS TOTAL
    [HOLD_AT]``: copy until the group has committed TOTAL records (the process a test SIGKILLs and
    restarts); see :mod:`tests.transactions.pipeline_process` for what it prints and HOLD_AT."""
    bootstrap, source, sink, group, transactional_id, partitions, total = sys.argv[1:8]
    pipeline = Pipeline(bootstrap, source, sink, group, transactional_id, int(partitions))
    pipeline.run.on_error = report_recovered
    try:
        run = pipeline.copy(
            int(total),
            within_s=600,
            on_progress=report_progress,
            interrupt_at=hold_points(sys.argv[8:]),
            interrupt=hold_open_transaction,
        )
    finally:
        pipeline.close()
    report_done(run)


if __name__ == "__main__":
    main()
