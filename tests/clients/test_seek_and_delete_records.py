"""Seeking by time and deleting records with real clients: confluent-kafka (librdkafka) and kafka-python.

Records are produced in one batch (librdkafka lingers, then sends them together), so a lookup
by time must pick the record inside the batch, not the batch's first offset.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from kcoord.protocol.record_batch import iter_batches
from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

T0 = 1_760_000_000_000
STAMPS = [T0 + 10 * i for i in range(10)]
STAMPS[6] = T0 + 500
"""Record 6 holds the largest time, so MAX_TIMESTAMP must answer 6, not the batch's 0."""


def produce_one_batch(bootstrap: str, topic: str, codec: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 500, "compression.type": codec, "acks": "all"}
    )
    for i, stamp in enumerate(STAMPS):
        producer.produce(topic, value=b"record-%d" % i, partition=0, timestamp=stamp)
    assert producer.flush(20) == 0


def batches_on_disk(data_dir: Path, topic: str) -> list[tuple[int, int]]:
    """(base offset, record count) of every batch stored for partition 0 of ``topic``."""
    stored = b"".join(path.read_bytes() for path in sorted((data_dir / f"{topic}-0").glob("*.log")))
    return [(header.base_offset, header.record_count) for _, header in iter_batches(stored)]


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
def test_offsets_for_times_finds_the_record_inside_a_batch(
    shared_kcoord: KcoordProcess, topic_name: str, codec: str
) -> None:
    """confluent-kafka and kafka-python offsets_for_times, and MAX_TIMESTAMP, answer the exact record."""
    bootstrap = shared_kcoord.bootstrap
    create_topic(bootstrap, topic_name, partitions=1)
    produce_one_batch(bootstrap, topic_name, codec)
    assert batches_on_disk(shared_kcoord.data_dir, topic_name) == [(0, 10)]

    wanted = {T0 + 25: (3, T0 + 30), T0 + 60: (6, T0 + 500), T0 + 61: (6, T0 + 500), T0: (0, T0)}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic_name}-seek"})
    try:
        for timestamp, (offset, _) in wanted.items():
            (found,) = consumer.offsets_for_times([TopicPartition(topic_name, 0, timestamp)], timeout=15)
            assert (timestamp, found.offset) == (timestamp, offset)
    finally:
        consumer.close()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    partition = TopicPartition(topic_name, 0)
    latest_time = admin.list_offsets({partition: OffsetSpec.max_timestamp()})[partition].result(timeout=15)
    assert (latest_time.offset, latest_time.timestamp) == (6, T0 + 500)

    kafka_consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = KafkaTopicPartition(topic_name, 0)
        for timestamp, expected in wanted.items():
            found_kp = kafka_consumer.offsets_for_times({tp: timestamp})[tp]
            assert found_kp is not None
            assert (timestamp, found_kp.offset, found_kp.timestamp) == (timestamp, *expected)
    finally:
        kafka_consumer.close()


def test_delete_records_then_consumers_start_at_the_new_log_start(
    shared_kcoord: KcoordProcess, topic_name: str
) -> None:
    """AdminClient.delete_records moves the log start; a consumer from the beginning starts there,
    also after a restart, and an offset past the high watermark is refused."""
    bootstrap = shared_kcoord.bootstrap
    create_topic(bootstrap, topic_name, partitions=1)
    produce_one_batch(bootstrap, topic_name, "none")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic_name, 0, 4)])
    (deleted,) = [future.result(timeout=15) for future in futures.values()]
    assert deleted.low_watermark == 4

    too_far = admin.delete_records([TopicPartition(topic_name, 0, 99)])
    with pytest.raises(Exception, match=r"OFFSET_OUT_OF_RANGE|out of range"):
        [future.result(timeout=15) for future in too_far.values()]

    assert first_offset_from_the_beginning(bootstrap, topic_name) == 4
    shared_kcoord.restart()
    assert first_offset_from_the_beginning(shared_kcoord.bootstrap, topic_name) == 4


def first_offset_from_the_beginning(bootstrap: str, topic: str) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                assert msg.value() == b"record-%d" % msg.offset()
                offset = msg.offset()
                assert offset is not None
                return offset
    finally:
        consumer.close()
    raise AssertionError(f"nothing consumed from {topic}")
