"""``pg_ctl restart`` under a producing and committing kcoord on ``postgresql://``: clients see
only retriable errors, nothing acknowledged is lost, and kcoord recovers without a restart."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.support.confluent_ops import consume_all, create_topic
from tests.support.postgres import PostgresCluster
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

TOPIC = "pg-outage"
PARTITIONS = 3
MESSAGES = 3000
DEADLINE_S = 60.0
RETRIABLE_COMMIT_ERRORS = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TIMED_OUT,
    KafkaError._WAIT_COORD,
}


class SteadyProducer(threading.Thread):
    """Produces MESSAGES values with acks=all at a steady pace; keeps what was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.acknowledged: set[bytes] = set()
        self.errors: list[str] = []
        self.sent = 0

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5})

        def delivered(err: KafkaError | None, msg: object) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                value = msg.value()  # type: ignore[attr-defined]
                assert isinstance(value, bytes)
                self.acknowledged.add(value)

        for i in range(MESSAGES):
            producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % PARTITIONS, on_delivery=delivered)
            self.sent += 1
            producer.poll(0)
            time.sleep(0.002)
        producer.flush(DEADLINE_S)


def commit_until_accepted(consumer: Consumer, offsets: list[TopicPartition], seen: set[int]) -> None:
    """Commit ``offsets``, retrying retriable errors (their codes go to ``seen``) for a bounded time."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            answers = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]
            assert error.code() in RETRIABLE_COMMIT_ERRORS, error
            seen.add(error.code())
        else:
            failed = [tp for tp in answers or [] if tp.error is not None]
            if not failed:
                return
            for tp in failed:
                assert tp.error.code() in RETRIABLE_COMMIT_ERRORS, tp.error
                seen.add(tp.error.code())
        assert time.monotonic() < deadline, "commits not accepted again after the restart"
        time.sleep(0.2)


def test_a_postgresql_restart_under_load_loses_nothing(
    kcoord_factory: type[KcoordProcess], postgres_cluster: PostgresCluster, tmp_path: Path
) -> None:
    url = postgres_cluster.create_database("outage")
    server = kcoord_factory(tmp_path / "data", extra_args=["--storage", url]).start()
    create_topic(server.bootstrap, TOPIC, PARTITIONS)
    committer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "pg-outage-group"})
    commit_errors: set[int] = set()
    try:
        commit_until_accepted(
            committer, [TopicPartition(TOPIC, p, 1) for p in range(PARTITIONS)], commit_errors
        )
        producer = SteadyProducer(server.bootstrap)
        producer.start()
        deadline = time.monotonic() + DEADLINE_S
        while producer.sent < MESSAGES // 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        postgres_cluster.restart()
        latest = [TopicPartition(TOPIC, p, 7) for p in range(PARTITIONS)]
        commit_until_accepted(committer, latest, commit_errors)
        producer.join(DEADLINE_S + 10)
        assert not producer.is_alive()
    finally:
        committer.close()
    assert not producer.errors, producer.errors[:5]
    assert len(producer.acknowledged) == MESSAGES
    assert server.proc is not None and server.proc.poll() is None, "kcoord needed a restart"
    assert server.events("log.write_failed"), "the restart never reached a write"
    assert server.events("log.recovered")

    server.kill()
    server.start()
    values = {c.value for c in consume_all(server.bootstrap, TOPIC, MESSAGES, PARTITIONS)}
    assert producer.acknowledged <= values
    reader = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "pg-outage-group"})
    try:
        stored = reader.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        reader.close()
    assert [tp.offset for tp in stored] == [7] * PARTITIONS
