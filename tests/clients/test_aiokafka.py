"""aiokafka round trips: AIOKafkaAdminClient-created topic, keyed produce with headers, assign + seek."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.support.clients import CODECS, PARTITIONS, Consumed, Message, make_messages
from tests.support.round_trip import assert_round_trip
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

DEADLINE_S = 20.0


async def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    assert [error[1] for error in response.topic_errors] == [0], response


async def produce_all(bootstrap: str, topic: str, messages: list[Message], codec: str) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
    )
    await producer.start()
    try:
        pending = [
            await producer.send(
                topic, key=m.key, value=m.value, headers=list(m.headers), timestamp_ms=m.timestamp_ms
            )
            for m in messages
        ]
        await asyncio.wait_for(asyncio.gather(*pending), DEADLINE_S)
    finally:
        await producer.stop()


async def consume_all(
    bootstrap: str, topic: str, expected: int, partitions: int = PARTITIONS
) -> list[Consumed]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    received: list[Consumed] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + DEADLINE_S
        while len(received) < expected and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500, max_records=5000)).values():
                received.extend(Consumed.of(r) for r in records)
    finally:
        await consumer.stop()
    return received


@pytest.mark.parametrize("codec", CODECS)
async def test_round_trip(shared_kcoord: KcoordProcess, topic_name: str, codec: str) -> None:
    """10,000 keyed messages with headers produced by aiokafka come back exactly once, in order, intact."""
    bootstrap = shared_kcoord.bootstrap
    await create_topic(bootstrap, topic_name)
    messages = make_messages("aiokafka")
    await produce_all(bootstrap, topic_name, messages, codec)
    received = await consume_all(bootstrap, topic_name, len(messages))
    assert_round_trip(shared_kcoord, topic_name, codec, messages, received)
