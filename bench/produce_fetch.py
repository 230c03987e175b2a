"""Data-path throughput with confluent-kafka: produce N records of a fixed size, then fetch them all.

Produce: acks=all, linger.ms=5, batch.size 1 MB, no compression, no keys; timed from the first
``produce()`` to the end of ``flush()``. Fetch: a consumer assigned to every partition from the
beginning, timed from ``assign()`` until the last record arrives. Every run uses a new topic.
MB is 10^6 bytes of record values (keys, headers and batch framing are not counted).
"""

from __future__ import annotations

import argparse
import os
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from report import Measurement
from server import BenchServer

DESCRIPTION = "produce then fetch N fixed-size records with confluent-kafka (acks=all)"
PHASE_TIMEOUT_S = 180.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("produce_fetch")
    group.add_argument("--records", type=int, default=200_000, help="records per run (default 200000)")
    group.add_argument("--record-bytes", type=int, default=1024, help="value size (default 1024)")
    group.add_argument("--partitions", type=int, default=6, help="partitions of the topic (default 6)")


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def _produce(bootstrap: str, topic: str, records: int, value: bytes) -> float:
    failures: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
                if time.monotonic() > deadline:
                    raise TimeoutError("produce did not finish in time") from None
    if producer.flush(max(1.0, deadline - time.monotonic())) != 0:
        raise TimeoutError("produce did not finish in time")
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} records failed, first: {failures[0]}")
    return elapsed


def _fetch(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 8_388_608,
            "queued.max.messages.kbytes": 262_144,
        }
    )
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    received = 0
    try:
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while received < records:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error() is not None:
                    raise RuntimeError(f"fetch error: {msg.error()}")
                received += 1
            if time.monotonic() > deadline:
                raise TimeoutError(f"fetched {received} of {records} in time")
        return time.perf_counter() - started
    finally:
        consumer.close()


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    records, size, partitions = options.records, options.record_bytes, options.partitions
    value = os.urandom(size)
    megabytes = records * size / 1e6
    produce_s: list[float] = []
    fetch_s: list[float] = []
    for run_number in range(options.runs):
        topic = f"bench-produce-fetch-{run_number}"
        _create_topic(server.bootstrap, topic, partitions)
        produce_s.append(_produce(server.bootstrap, topic, records, value))
        fetch_s.append(_fetch(server.bootstrap, topic, partitions, records))
        print(
            f"  run {run_number + 1}: produce {produce_s[-1]:.2f} s, fetch {fetch_s[-1]:.2f} s",
            flush=True,
        )
    return [
        Measurement("produce", "records/s", tuple(records / s for s in produce_s)),
        Measurement("produce", "MB/s", tuple(megabytes / s for s in produce_s)),
        Measurement("fetch", "records/s", tuple(records / s for s in fetch_s)),
        Measurement("fetch", "MB/s", tuple(megabytes / s for s in fetch_s)),
    ]
