"""confluent-kafka (librdkafka 2.16) round trips: admin-created topic, keyed produce with headers, assign+read."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.clients import CODECS, PARTITIONS, Consumed, Message, make_messages, verify_round_trip
from tests.support.raw_client import RawClient
from tests.support.raw_ops import stored_compressions
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

DEADLINE_S = 20.0


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
                received.append(
                    Consumed(
                        partition=msg.partition(),
                        offset=msg.offset(),
                        key=msg.key(),
                        value=msg.value(),
                        headers=tuple(msg.headers() or ()),
                        timestamp_ms=msg.timestamp()[1],
                    )
                )
    finally:
        consumer.close()
    return received


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(shared_kcoord: KcoordProcess, topic_name: str, codec: str) -> None:
    """10,000 keyed messages with headers produced by librdkafka come back exactly once, in order, intact."""
    bootstrap = shared_kcoord.bootstrap
    create_topic(bootstrap, topic_name)
    messages = make_messages("confluent-kafka")
    produce_all(bootstrap, topic_name, messages, codec)
    received = consume_all(bootstrap, topic_name, len(messages))
    counts = verify_round_trip(messages, received)
    assert len(counts) == PARTITIONS, counts
    with RawClient(shared_kcoord.host, shared_kcoord.port) as raw:
        assert stored_compressions(raw, topic_name, PARTITIONS) == {codec}
