"""kafka-python 3.x round trips: admin-made topic, keyed produce with headers, assign + seek to start."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

from tests.support.clients import CODECS, PARTITIONS, Consumed, Message, make_messages
from tests.support.round_trip import assert_round_trip
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

DEADLINE_S = 20.0


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp3-admin")
    try:
        admin.create_topics(
            {topic: {"num_partitions": partitions, "replication_factor": 1}}, wait_for_metadata=True
        )
    finally:
        admin.close()


def produce_all(bootstrap: str, topic: str, messages: list[Message], codec: str) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
    )
    try:
        futures = [
            producer.send(
                topic, key=m.key, value=m.value, headers=list(m.headers), timestamp_ms=m.timestamp_ms
            )
            for m in messages
        ]
        producer.flush(timeout=DEADLINE_S)
        for future in futures:
            future.get(timeout=1)
    finally:
        producer.close(timeout=5)


def consume_all(bootstrap: str, topic: str, expected: int, partitions: int = PARTITIONS) -> list[Consumed]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    received: list[Consumed] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + DEADLINE_S
        while len(received) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=5000).values():
                received.extend(Consumed.of(r) for r in records)
    finally:
        consumer.close()
    return received


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(shared_kcoord: KcoordProcess, topic_name: str, codec: str) -> None:
    """10,000 keyed messages with headers from kafka-python 3 come back exactly once, in order, intact."""
    bootstrap = shared_kcoord.bootstrap
    create_topic(bootstrap, topic_name)
    messages = make_messages("kafka-python")
    produce_all(bootstrap, topic_name, messages, codec)
    received = consume_all(bootstrap, topic_name, len(messages))
    assert_round_trip(shared_kcoord, topic_name, codec, messages, received)
