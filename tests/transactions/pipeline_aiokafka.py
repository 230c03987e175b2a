"""An aiokafka consume-transform-produce pipeline, exactly once: the loop of
:mod:`tests.transactions.pipeline` (confluent-kafka) with aiokafka's ``AIOKafkaConsumer`` and
transactional ``AIOKafkaProducer``.

One consumer (read_committed, a subscribed group, no auto commit) and one transactional producer: each
batch from ``getmany`` is produced transformed (``out-`` + value) and the consumed offsets are sent to
the same transaction (aiokafka sends the group id only, without KIP-447's generation). A transaction
that fails is aborted and the consumer rewinds to its group's committed offsets; a producer that cannot
abort (fenced, say) is stopped and replaced by a new one with the same ``transactional.id``.

The committed total it reports is kept locally: the group's committed offsets as read at start and at
each rewind, advanced by each commit that succeeded. Nothing else commits for the group.

``python -m tests.transactions.pipeline_aiokafka BOOTSTRAP SOURCE SINK GROUP TXN_ID PARTITIONS TOTAL
[HOLD_AT]``;
the lines it prints are :mod:`tests.transactions.pipeline_process`'s.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from tests.transactions.pipeline_process import (
    READ_COMMITTED_CONSUMER,
    PipelineRun,
    hold_open_transaction,
    hold_points,
    report_done,
    report_progress,
    report_recovered,
)

DEADLINE_S = 30.0


class AiokafkaPipeline:
    def __init__(
        self, bootstrap: str, source: str, sink: str, group: str, transactional_id: str, partitions: int
    ) -> None:
        self.bootstrap, self.sink, self.group = bootstrap, sink, group
        self.transactional_id = transactional_id
        self.partitions = [TopicPartition(source, p) for p in range(partitions)]
        self.run = PipelineRun(on_error=report_recovered)
        self.consumer = AIOKafkaConsumer(
            source,
            bootstrap_servers=bootstrap,
            group_id=group,
            **READ_COMMITTED_CONSUMER,
        )
        self.producer: AIOKafkaProducer | None = None
        self.committed: dict[TopicPartition, int] = {}

    async def start(self) -> None:
        await self.consumer.start()
        self.producer = await self._new_producer()

    async def _new_producer(self) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, transactional_id=self.transactional_id, linger_ms=5
        )
        await producer.start()
        self.run.producers += 1
        return producer

    async def copy(self, total: int, within_s: float, hold_at: list[int]) -> PipelineRun:
        """Process until the group's committed offsets cover ``total`` input records, holding the
        transactions at ``hold_at`` open (:func:`hold_open_transaction`)."""
        deadline = time.monotonic() + within_s
        points = sorted(hold_at)
        self.committed = await self._read_committed(self.partitions)
        report_progress(self._total())
        while self._total() < total:
            copied = self._total()
            assert time.monotonic() < deadline, f"copied {copied} of {total} in {within_s}s: {self.run}"
            batches = await self.consumer.getmany(timeout_ms=500, max_records=500)
            offsets = {tp: messages[-1].offset + 1 for tp, messages in batches.items() if messages}
            if not offsets:
                continue
            try:
                hold = bool(points) and self._total() >= points[0]
                if hold:
                    points.pop(0)
                await self._transaction(batches, offsets, hold)
            except KafkaError as exc:
                await self._recover(exc)
                continue
            self.run.transactions += 1
            self.committed.update(offsets)
            report_progress(self._total())
        return self.run

    async def _transaction(
        self, batches: dict[TopicPartition, list[Any]], offsets: dict[TopicPartition, int], hold: bool
    ) -> None:
        producer = self.producer
        assert producer is not None
        await producer.begin_transaction()
        sent = []
        try:
            for tp, messages in batches.items():
                for message in messages:
                    sent.append(
                        await producer.send(self.sink, value=b"out-" + message.value, partition=tp.partition)
                    )
            if hold:
                await producer.flush()
                await asyncio.to_thread(hold_open_transaction, self._total())
            await producer.send_offsets_to_transaction(offsets, self.group)
            await producer.commit_transaction()
        finally:
            await asyncio.gather(*sent, return_exceptions=True)

    def _total(self) -> int:
        return sum(self.committed.get(tp, 0) for tp in self.partitions)

    async def _recover(self, exc: KafkaError) -> None:
        self.run.note(repr(exc))
        assert self.producer is not None
        try:
            await self.producer.abort_transaction()
        except KafkaError as again:
            self.run.note(f"abort failed: {again!r}")
            await self.producer.stop()
            self.producer = await self._new_producer()
        self.run.aborted += 1
        await self._rewind()

    async def _rewind(self) -> None:
        """Back to the group's committed offsets: the aborted batch is processed again."""
        assignment = list(self.consumer.assignment())
        committed = await self._read_committed(assignment)
        self.committed.update(committed)
        for tp in assignment:
            if tp in committed:
                self.consumer.seek(tp, committed[tp])
            else:
                await self.consumer.seek_to_beginning(tp)

    async def _read_committed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of ``partitions`` (those it has); asked again while kcoord is
        down."""
        for attempt in range(10):
            try:
                async with asyncio.timeout(DEADLINE_S):
                    offsets = {tp: await self.consumer.committed(tp) for tp in partitions}
                return {tp: offset for tp, offset in offsets.items() if offset is not None}
            except (KafkaError, TimeoutError) as exc:
                self.run.note(f"committed offsets unknown: {exc!r}")
                if attempt == 9:
                    raise
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.consumer.stop()
        if self.producer is not None:
            await self.producer.stop()


async def amain() -> None:
    bootstrap, source, sink, group, transactional_id, partitions, total = sys.argv[1:8]
    pipeline = AiokafkaPipeline(bootstrap, source, sink, group, transactional_id, int(partitions))
    try:
        await pipeline.start()
        run = await pipeline.copy(int(total), within_s=600, hold_at=hold_points(sys.argv[8:]))
    finally:
        await pipeline.close()
    report_done(run)


if __name__ == "__main__":
    asyncio.run(amain())
