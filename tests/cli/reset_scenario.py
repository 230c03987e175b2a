"""A topic whose records sit in separate batches with known timestamps, and confluent-kafka group
consumers that commit and resume: what the ``reset-offsets`` tests drive."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer

from kcoord.cli.admin_client import AdminClient
from tests.support.confluent_ops import create_topic

RECORDS = 10
PARTITIONS = 2
STEP_MS = 1000
DEADLINE_S = 30.0


@dataclass(frozen=True)
class FilledTopic:
    name: str
    base_ms: int

    def timestamp_of(self, offset: int) -> int:
        return self.base_ms + offset * STEP_MS


def fill_topic(bootstrap: str, topic: str) -> FilledTopic:
    """``RECORDS`` records per partition, one batch each (a flush per record), 1 s apart in time."""
    create_topic(bootstrap, topic, PARTITIONS)
    filled = FilledTopic(topic, (int(time.time()) - 3600) * 1000)
    append(bootstrap, filled, range(RECORDS))
    return filled


def append(bootstrap: str, topic: FilledTopic, offsets: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for offset in offsets:
        for partition in range(PARTITIONS):
            producer.produce(
                topic.name,
                value=f"{partition}-{offset}".encode(),
                partition=partition,
                timestamp=topic.timestamp_of(offset),
            )
        assert producer.flush(DEADLINE_S) == 0


def group_consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
        }
    )
    consumer.subscribe([topic])
    return consumer


def first_offsets_resumed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """A real group consumer joins, and the offset of the first record it gets on each partition."""
    consumer = group_consumer(bootstrap, group, topic)
    first: dict[int, int] = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None
            first.setdefault(partition, offset)
    finally:
        consumer.close()
    return first


def wait_until_assigned(consumer: Consumer) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not consumer.assignment():
        assert time.monotonic() < deadline, "consumer never got an assignment"
        consumer.poll(0.2)


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    host, _, port = bootstrap.rpartition(":")
    with AdminClient(host, int(port)) as client:
        return client.group_offsets(group).committed
