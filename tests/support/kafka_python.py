"""Working around a kafka-python 3.0.12 stall in the tests that use its group consumer.

A kafka-python leader that assigns partitions before its metadata knows the subscribed topic
assigns nothing, notices the metadata change, rejoins at once, and then (about one run in five
with two members) stops after receiving the next SyncGroup answer: the answer arrives intact
(seen on the wire and in the client's own debug log), but the client neither logs
"Heartbeat re-enabled" nor sends anything again until the coordinator expires it. The server is
not involved. Learning the topic's partitions before subscribing makes the first assignment cover
them, but does not avoid the rejoin: the coordinator's metadata snapshot is only rebuilt at the next
refresh after ``subscribe`` (the mechanism: tests/support/kafka_python_stall.py).
"""

from __future__ import annotations

import time

from kafka import KafkaConsumer


def subscribe_when_known(
    consumer: KafkaConsumer, topic: str, timeout_s: float = 30.0, **kwargs: object
) -> None:
    """Subscribe once the consumer's metadata has ``topic``'s partitions."""
    deadline = time.monotonic() + timeout_s
    while not consumer.partitions_for_topic(topic):
        if time.monotonic() > deadline:
            raise AssertionError(f"kafka-python never learned the partitions of {topic!r}")
        time.sleep(0.05)
    consumer.subscribe([topic], **kwargs)
