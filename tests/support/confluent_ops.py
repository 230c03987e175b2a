"""confluent-kafka helpers for the round-trip scenario: create a topic, produce all, read all back."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.support.clients import PARTITIONS, Consumed, Message

DEADLINE_S = 20.0


def _as_bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=15)


def produce_all(bootstrap: str, topic: str, messages: list[Message], codec: str) -> None:
    errors: list[str] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 5,
        }
    )
    for message in messages:
        while True:
            try:
                producer.produce(
                    topic,
                    key=message.key,
                    value=message.value,
                    headers=list(message.headers),
                    timestamp=message.timestamp_ms,
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0, "messages still undelivered"
    assert not errors, errors[:5]


def consume_all(bootstrap: str, topic: str, expected: int, partitions: int = PARTITIONS) -> list[Consumed]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    received: list[Consumed] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(received) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                partition, offset, headers = msg.partition(), msg.offset(), msg.headers() or []
                assert partition is not None and offset is not None and isinstance(headers, list)
                received.append(
                    Consumed(
                        partition=partition,
                        offset=offset,
                        key=_as_bytes(msg.key()),
                        value=_as_bytes(msg.value()),
                        headers=tuple((name, _as_bytes(value)) for name, value in headers),
                        timestamp_ms=msg.timestamp()[1],
                    )
                )
    finally:
        consumer.close()
    return received
