"""confluent-kafka ``ShareConsumer`` members run in threads, for the share group scenarios.

Each member polls in its own thread (librdkafka releases the GIL while it waits) and records what
it was delivered; in explicit mode it accepts every record and counts as acknowledged only what a
``commit_sync`` confirmed, and as uncertain what a failed commit covered.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.support.server import KcoordProcess

POLL_S = 0.2


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(15)


def produce_numbers(bootstrap: str, topic: str, count: int, first: int = 0) -> None:
    """Values ``str(first)`` .. ``str(first + count - 1)``, all acknowledged by the broker."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for number in range(first, first + count):
        while True:
            try:
                producer.produce(topic, value=str(number).encode())
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(30) == 0, "the producer could not deliver every record"


def new_consumer(bootstrap: str, group: str, topic: str, *, explicit: bool = False) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        }
    )
    consumer.subscribe([topic])
    return consumer


def wait_until_share_partition_loaded(server: KcoordProcess, group: str, timeout: float = 30.0) -> None:
    """A positive sign that the group's share partition exists (so ``latest`` starts before what is
    produced next): its ``share_partition.loaded`` log line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.get("group") == group for e in server.events("share_partition.loaded")):
            return
        time.sleep(0.05)
    raise AssertionError(f"the share partition of {group} was not loaded within {timeout}s")


@dataclass
class Member:
    """One share consumer thread and what it saw: delivered values (with repeats), and in explicit
    mode the values whose acceptance a commit confirmed or left uncertain."""

    consumer: ShareConsumer
    explicit: bool
    delivered: list[int] = field(default_factory=list)
    delivery_counts: dict[int, int] = field(default_factory=dict)
    """The highest delivery count each value came with."""
    acknowledged: set[int] = field(default_factory=set)
    uncertain: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    after_commit: Callable[[], None] = lambda: None
    """Called in the member's thread after each commit (a test's fault injection point)."""
    hold_s: float = 0.0
    """How long the member works on a delivery before acknowledging it (explicit mode)."""

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                messages = self.consumer.poll(POLL_S)
            except KafkaException as exc:
                self.errors.append(str(exc))
                continue
            values = []
            for message in messages:
                if message.error() is not None:
                    self.errors.append(str(message.error()))
                    continue
                value = int(message.value())
                values.append(value)
                count = message.delivery_count() or 0
                self.delivery_counts[value] = max(count, self.delivery_counts.get(value, 0))
                if self.explicit:
                    self.consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            self.delivered.extend(values)
            if self.explicit and values:
                time.sleep(self.hold_s)
                self._commit(values)
                self.after_commit()

    def _commit(self, values: list[int]) -> None:
        try:
            results = self.consumer.commit_sync(30)
        except KafkaException as exc:
            self.errors.append(str(exc))
            self.uncertain.update(values)
            return
        if results and all(error is None for error in results.values()):
            self.acknowledged.update(values)
        else:
            self.uncertain.update(values)

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(60)
        try:
            self.consumer.close()
        except KafkaException as exc:
            self.errors.append(str(exc))


def start_members(count: int, make: Callable[[], ShareConsumer], *, explicit: bool = False) -> list[Member]:
    members = [Member(make(), explicit) for _ in range(count)]
    for member in members:
        member.thread = threading.Thread(target=member.run, daemon=True)
        member.thread.start()
    return members


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout}s")
