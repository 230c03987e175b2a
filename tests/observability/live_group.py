"""A consumer group formed by real kafka-python consumers against a kcoord subprocess, for the
observability tests: a topic with known log end offsets, a Stable group, known committed offsets.

The group forms through :func:`form`: a consumer hit by kafka-python 3.0.12's post-SyncGroup stall
(tests/support/kafka_python_stall.py) is replaced once, and only when the server's debug log proves
the stall; the server must run at ``kcoord.log.level=debug``."""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from tests.support import kafka_python_stall
from tests.support.kafka_python import subscribe_when_known
from tests.support.server import KcoordProcess

PARTITIONS = 3
MESSAGES_PER_PARTITION = 10
COMMITTED = 4
DEADLINE_S = 30.0
SESSION_TIMEOUT_MS = int(KafkaConsumer.DEFAULT_CONFIG["session_timeout_ms"])
HEARTBEAT_MS = int(KafkaConsumer.DEFAULT_CONFIG["heartbeat_interval_ms"])


def create_topic_with_messages(bootstrap: str, topic: str) -> None:
    """``PARTITIONS`` partitions, each holding ``MESSAGES_PER_PARTITION`` records (offsets 0..9)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="obs-admin")
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for partition in range(PARTITIONS):
            for i in range(MESSAGES_PER_PARTITION):
                producer.send(topic, value=f"m{i}".encode(), partition=partition)
        producer.flush(timeout=DEADLINE_S)
    finally:
        producer.close(timeout=5)


class PollingConsumer:
    """A kafka-python consumer polled continuously by its own thread, as an application would.

    KafkaConsumer is not thread-safe, so work on it (a commit) is handed to the polling thread.
    """

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str, **config: Any) -> None:
        self.client_id = client_id
        self.group = group
        self._settings = (bootstrap, topic, config)
        self.session_timeout_ms = int(config.get("session_timeout_ms", SESSION_TIMEOUT_MS))
        self.heartbeat_ms = int(config.get("heartbeat_interval_ms", HEARTBEAT_MS))
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=client_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **config,
        )
        subscribe_when_known(self.consumer, topic)
        self._work: queue.Queue[Callable[[KafkaConsumer], None]] = queue.Queue()
        self._stop = threading.Event()
        self.polling = threading.Event()
        self.polling.set()
        self.assignment: set[TopicPartition] = set()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.polling.is_set():
                time.sleep(0.05)
                continue
            self.consumer.poll(timeout_ms=100)
            self.assignment = set(self.consumer.assignment())
            while not self._work.empty():
                self._work.get()(self.consumer)

    def run_in_thread(self, work: Callable[[KafkaConsumer], None]) -> None:
        done = threading.Event()

        def wrapped(consumer: KafkaConsumer) -> None:
            try:
                work(consumer)
            finally:
                done.set()

        self._work.put(wrapped)
        assert done.wait(DEADLINE_S), "the polling thread did not run the work"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(DEADLINE_S)
        self.consumer.close(autocommit=False)

    def again(self) -> PollingConsumer:
        """A new consumer with this one's settings, under a client id of its own."""
        bootstrap, topic, config = self._settings
        return PollingConsumer(bootstrap, self.group, topic, f"{self.client_id}-again", **config)


def wait_until_assigned(consumers: list[PollingConsumer], partitions: int = PARTITIONS) -> None:
    """Wait until the consumers' assignments cover all partitions exactly once."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        owned = [tp for consumer in consumers for tp in consumer.assignment]
        covered = len(owned) == partitions and len(set(owned)) == partitions
        if covered and all(c.assignment for c in consumers):
            return
        time.sleep(0.1)
    raise AssertionError("the group did not settle: " + repr([c.assignment for c in consumers]))


def form(server: KcoordProcess, consumers: list[PollingConsumer]) -> list[PollingConsumer]:
    """:func:`wait_until_assigned`; a consumer left owning nothing by a proven kafka-python stall
    (:func:`tests.support.kafka_python_stall.awaited_stall`) is closed and replaced once by
    :meth:`PollingConsumer.again`. Returns the members; anything else fails naming the idle ones."""
    group = consumers[0].group
    kafka_python_stall.FORMED.append(group)
    try:
        wait_until_assigned(consumers)
        return consumers
    except AssertionError as failure:
        idle = [c for c in consumers if not c.assignment]
        proofs = {
            c.client_id: kafka_python_stall.awaited_stall(
                server,
                group,
                c.client_id,
                session_timeout_ms=c.session_timeout_ms,
                heartbeat_ms=c.heartbeat_ms,
            )
            for c in idle
        }
        unproven = [name for name, proof in proofs.items() if proof is None]
        if not idle or unproven:
            raise AssertionError(
                f"{failure}; members owning nothing without the kafka-python stall's server-side "
                f"signature: {unproven or 'none idle'}"
            ) from None
    members: list[PollingConsumer] = []
    for consumer in consumers:
        proof = proofs.get(consumer.client_id)
        if proof is None:
            members.append(consumer)
            continue
        kafka_python_stall.RETRIES.append(f"{group}: {proof.describe()}")
        consumer.close()
        members.append(consumer.again())
    wait_until_assigned(members)
    return members


def commit_fixed_offsets(consumers: list[PollingConsumer]) -> None:
    """Each consumer commits offset ``COMMITTED`` for every partition it owns."""
    for consumer in consumers:
        consumer.run_in_thread(
            lambda c: c.commit({tp: OffsetAndMetadata(COMMITTED, "", -1) for tp in c.assignment()})
        )


def assignments(consumers: list[PollingConsumer]) -> dict[str, set[TopicPartition]]:
    """client id -> owned partitions."""
    return {consumer.client_id: set(consumer.assignment) for consumer in consumers}


def http_get_json(address: str, path: str) -> Any:
    with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as reply:
        return json.load(reply)


def http_get_text(address: str, path: str) -> str:
    with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as reply:
        return str(reply.read().decode())
