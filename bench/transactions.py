"""Exactly-once cost: a consume-transform-produce loop with and without transactions (issue 17, acceptance 6).

One input topic is filled once (plain producer, so its last stable offset is its high watermark).
Per size of `--transactions-sizes` (100 and 1,000 records per transaction) two pipelines copy it to
an output topic, each with one confluent-kafka consumer (its own group, ``subscribe()``) and one
producer (acks=all, linger.ms=5), records going to the output partition of their input partition:

- ``transactional``: the consumer reads with ``isolation.level=read_committed``; per batch the
  transactional producer runs ``begin_transaction``, produces the batch, ``flush()``,
  ``send_offsets_to_transaction`` (the consumer's positions and group metadata) and
  ``commit_transaction``;
- ``plain``: the same loop without a transaction: produce the batch, ``flush()`` (idempotent producer
  unless `--transactions-plain-producer plain`), then a synchronous ``commit()`` of the positions.

The pipelines are built once and warmed up with one batch; then `--runs` pairs alternate the two
(the order flips every pair), each measurement copying `--transactions-records` records (or what it
copies in `--transactions-seconds`). Reported per size: transactions (batches) per second, records
per second, the transactional/plain ratio of records per second within each pair; where a batch's
time goes (``consume()``, begin+produce+``flush()``, ``send_offsets_to_transaction``, the commit);
the p99 of ``commit_transaction`` timed by the client (after ``flush()`` it is the EndTxn round
trip; the plain loop's synchronous ``commit()`` is shown beside it) per run and pooled over the
runs; and the p99 of EndTxn as the server's ``kcoord_request_duration_seconds`` histogram has it
(the upper bound of its bucket), from ``/metrics`` before and after each transactional measurement,
with the AddPartitionsToTxn requests per transaction (above 1 where librdkafka registered the
partitions in several requests or retried one answered CONCURRENT_TRANSACTIONS, which it does
after 20 ms while the previous transaction's markers are still being written).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

import server_metrics
import wire
from group_formation import metrics_address
from report import Measurement
from server import BenchServer

DESCRIPTION = "consume-transform-produce with confluent-kafka: transactional vs plain, EndTxn p99"
TIMEOUT_S = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("transactions")
    group.add_argument(
        "--transactions-sizes", type=int, nargs="+", default=[100, 1000], help="records per transaction"
    )
    group.add_argument(
        "--transactions-records", type=int, default=50_000, help="records copied per measurement (50000)"
    )
    group.add_argument(
        "--transactions-seconds", type=float, default=30.0, help="time cap of one measurement (30 s)"
    )
    group.add_argument("--transactions-partitions", type=int, default=3, help="input/output partitions (3)")
    group.add_argument("--transactions-record-bytes", type=int, default=256, help="value size (256)")
    group.add_argument(
        "--transactions-plain-producer",
        choices=("idempotent", "plain"),
        default="idempotent",
        help="the plain loop's producer (idempotent)",
    )


@dataclass
class Copied:
    """What one measurement did: batches, records, seconds, and each batch's commit latency."""

    batches: int = 0
    records: int = 0
    seconds: float = 0.0
    commit_s: list[float] = field(default_factory=list)
    consume_s: list[float] = field(default_factory=list)
    """Per batch: time spent in ``consume()``."""
    produce_s: list[float] = field(default_factory=list)
    """Per batch: ``begin_transaction`` to the end of ``flush()``, less the time in ``consume()``."""
    offsets_s: list[float] = field(default_factory=list)
    """Per transaction: ``send_offsets_to_transaction`` (AddOffsetsToTxn and TxnOffsetCommit)."""


class Pipeline:
    """One consumer and one producer copying the input topic to the output topic in batches."""

    def __init__(self, bootstrap: str, name: str, transactional: bool, options: argparse.Namespace) -> None:
        self.transactional = transactional
        self.output = f"{name}-out"
        consumer_config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "max.poll.interval.ms": 3_600_000,
            "queued.max.messages.kbytes": 16_384,
        }
        producer_config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
        if transactional:
            consumer_config["isolation.level"] = "read_committed"
            producer_config["transactional.id"] = name
        else:
            producer_config["enable.idempotence"] = options.transactions_plain_producer == "idempotent"
        wire.create_topic(bootstrap, self.output, options.transactions_partitions)
        self.consumer = Consumer(consumer_config)
        self.producer = Producer(producer_config)
        self.failures: list[KafkaError] = []
        if transactional:
            self.producer.init_transactions(TIMEOUT_S)

    def subscribe(self, topic: str) -> None:
        self.consumer.subscribe([topic])

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.failures.append(err)

    def _batch(self, size: int, deadline: float) -> tuple[dict[tuple[str, int], int], float]:
        """Consume ``size`` records and produce them: the next offset of every input partition read, and
        the seconds spent in ``consume()``."""
        positions: dict[tuple[str, int], int] = {}
        taken = 0
        consuming = 0.0
        while taken < size:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{taken} of {size} records read in time")
            asked = time.perf_counter()
            messages = self.consumer.consume(num_messages=size - taken, timeout=1.0)
            consuming += time.perf_counter() - asked
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(f"consume error: {message.error()}")
                partition = message.partition()
                offset = message.offset()
                assert partition is not None and offset is not None
                self._produce(message.value(), partition)
                positions[(message.topic() or "", partition)] = offset + 1
                taken += 1
        return positions, consuming

    def _produce(self, value: bytes | None, partition: int) -> None:
        while True:
            try:
                self.producer.produce(
                    self.output, value=value, partition=partition, on_delivery=self._delivered
                )
                return
            except BufferError:
                self.producer.poll(0.01)

    def copy(self, size: int, records: int, seconds: float) -> Copied:
        """Copy ``records`` records in batches of ``size`` (fewer if ``seconds`` pass first)."""
        copied = Copied()
        deadline = time.monotonic() + TIMEOUT_S
        started = time.perf_counter()
        while copied.records + size <= records and time.perf_counter() - started < seconds:
            batch_started = time.perf_counter()
            if self.transactional:
                self.producer.begin_transaction()
            positions, consuming = self._batch(size, deadline)
            if self.producer.flush(TIMEOUT_S) != 0:
                raise TimeoutError("produce did not finish in time")
            if self.failures:
                raise RuntimeError(f"{len(self.failures)} records failed, first: {self.failures[0]}")
            offsets = [TopicPartition(topic, p, offset) for (topic, p), offset in positions.items()]
            copied.consume_s.append(consuming)
            copied.produce_s.append(time.perf_counter() - batch_started - consuming)
            if self.transactional:
                metadata = self.consumer.consumer_group_metadata()
                sending = time.perf_counter()
                self.producer.send_offsets_to_transaction(offsets, metadata, TIMEOUT_S)
                committing = time.perf_counter()
                copied.offsets_s.append(committing - sending)
                self.producer.commit_transaction(TIMEOUT_S)
            else:
                committing = time.perf_counter()
                self.consumer.commit(offsets=offsets, asynchronous=False)
            copied.commit_s.append(time.perf_counter() - committing)
            copied.batches += 1
            copied.records += size
        copied.seconds = time.perf_counter() - started
        return copied

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(TIMEOUT_S)
        self.producer.close()


def _fill(bootstrap: str, topic: str, partitions: int, records: int, value_bytes: int) -> None:
    wire.create_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    value = os.urandom(value_bytes)
    deadline = time.monotonic() + TIMEOUT_S
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.01)
                if time.monotonic() > deadline:
                    raise TimeoutError("the input topic was not filled in time") from None
    if producer.flush(TIMEOUT_S) != 0:
        raise TimeoutError("the input topic was not filled in time")


@dataclass(frozen=True)
class ServerView:
    """What the server's /metrics say of one transactional measurement."""

    endtxn_p99_s: float
    add_partitions_requests: float


def server_view(before: str, after: str) -> ServerView:
    buckets = server_metrics.request_buckets
    return ServerView(
        endtxn_p99_s=server_metrics.bucket_quantile(
            buckets(before, "EndTxn"), buckets(after, "EndTxn"), 0.99
        ),
        add_partitions_requests=server_metrics.requests(after, "AddPartitionsToTxn")
        - server_metrics.requests(before, "AddPartitionsToTxn"),
    )


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    sizes: list[int] = options.transactions_sizes
    records: int = options.transactions_records
    pairs: int = options.runs
    metrics = metrics_address(server)
    source = "bench-txn-in"
    total = pairs * records + max(sizes)
    print(f"  filling {source} with {total:,} records", flush=True)
    _fill(server.bootstrap, source, options.transactions_partitions, total, options.transactions_record_bytes)
    pipelines: dict[tuple[int, bool], Pipeline] = {}
    for size in sizes:
        for transactional in (True, False):
            name = f"bench-txn-{size}-{'txn' if transactional else 'plain'}"
            pipelines[(size, transactional)] = Pipeline(server.bootstrap, name, transactional, options)
    measurements: list[Measurement] = []
    try:
        for pipeline in pipelines.values():
            pipeline.subscribe(source)
        for (size, _), pipeline in pipelines.items():
            pipeline.copy(size, size, TIMEOUT_S)  # warm-up: group formed, connections and producer id ready
        results: dict[tuple[int, bool], list[Copied]] = {key: [] for key in pipelines}
        views: dict[int, list[ServerView]] = {size: [] for size in sizes}
        for pair in range(pairs):
            for size in sizes:
                for transactional in (True, False) if pair % 2 == 0 else (False, True):
                    before = server_metrics.scrape(metrics) if transactional else ""
                    copied = pipelines[(size, transactional)].copy(
                        size, records, options.transactions_seconds
                    )
                    if transactional:
                        views[size].append(server_view(before, server_metrics.scrape(metrics)))
                    results[(size, transactional)].append(copied)
                    print(
                        f"  pair {pair + 1}, {size}/txn {'transactional' if transactional else 'plain'}: "
                        f"{copied.records:,} records in {copied.seconds:.2f} s, "
                        f"commit p99 {quantile(copied.commit_s, 0.99) * 1000:.1f} ms",
                        flush=True,
                    )
        for size in sizes:
            measurements += _size_measurements(size, results[(size, True)], results[(size, False)])
            txn_runs = results[(size, True)]
            measurements += [
                Measurement(
                    f"{size}/txn EndTxn p99, server histogram bucket",
                    "ms",
                    tuple(v.endtxn_p99_s * 1000 for v in views[size]),
                ),
                Measurement(
                    f"{size}/txn AddPartitionsToTxn requests per transaction",
                    "requests",
                    tuple(
                        v.add_partitions_requests / c.batches
                        for v, c in zip(views[size], txn_runs, strict=True)
                    ),
                ),
            ]
    finally:
        for pipeline in pipelines.values():
            pipeline.close()
    return measurements


def _ms(values: Sequence[float]) -> float:
    return statistics.fmean(values) * 1000 if values else float("nan")


def _size_measurements(size: int, txn: list[Copied], plain: list[Copied]) -> list[Measurement]:
    prefix = f"{size}/txn"

    def each(figure: Callable[[Copied], float], runs: list[Copied]) -> tuple[float, ...]:
        return tuple(figure(c) for c in runs)

    pooled = [s for c in txn for s in c.commit_s]
    return [
        Measurement(f"{prefix} transactional", "txn/s", each(lambda c: c.batches / c.seconds, txn)),
        Measurement(f"{prefix} transactional", "records/s", each(lambda c: c.records / c.seconds, txn)),
        Measurement(f"{prefix} plain", "batches/s", each(lambda c: c.batches / c.seconds, plain)),
        Measurement(f"{prefix} plain", "records/s", each(lambda c: c.records / c.seconds, plain)),
        Measurement(
            f"{prefix} records/s transactional / plain",
            "ratio",
            tuple((t.records / t.seconds) / (p.records / p.seconds) for t, p in zip(txn, plain, strict=True)),
        ),
        Measurement(f"{prefix} transactional: consume", "ms mean", each(lambda c: _ms(c.consume_s), txn)),
        Measurement(
            f"{prefix} transactional: begin+produce+flush", "ms mean", each(lambda c: _ms(c.produce_s), txn)
        ),
        Measurement(
            f"{prefix} transactional: send_offsets_to_transaction",
            "ms mean",
            each(lambda c: _ms(c.offsets_s), txn),
        ),
        Measurement(
            f"{prefix} transactional: commit_transaction", "ms mean", each(lambda c: _ms(c.commit_s), txn)
        ),
        Measurement(f"{prefix} plain: consume", "ms mean", each(lambda c: _ms(c.consume_s), plain)),
        Measurement(f"{prefix} plain: produce+flush", "ms mean", each(lambda c: _ms(c.produce_s), plain)),
        Measurement(f"{prefix} plain: commit()", "ms mean", each(lambda c: _ms(c.commit_s), plain)),
        Measurement(
            f"{prefix} plain: commit() p99", "ms", each(lambda c: quantile(c.commit_s, 0.99) * 1000, plain)
        ),
        Measurement(
            f"{prefix} EndTxn p99 (commit_transaction)",
            "ms",
            each(lambda c: quantile(c.commit_s, 0.99) * 1000, txn),
        ),
        Measurement(f"{prefix} EndTxn p99, {len(pooled)} pooled", "ms", (quantile(pooled, 0.99) * 1000,)),
    ]
