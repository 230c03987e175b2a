"""``pg_ctl restart`` under a producing, consuming and committing kcoord on ``postgresql://``
(acceptance 5 of issue 9, one node): every error any client reports is retriable, nothing
acknowledged is lost, and kcoord recovers without a restart.

The load: a confluent-kafka and a kafka-python producer (acks=all), a group of confluent-kafka,
kafka-python and aiokafka members consuming and committing after every batch, and a standalone
committer. Every error they report from the moment the load starts is recorded and classified
(tests/support/client_errors.py); the tally is printed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaProducer

from tests.support.client_errors import ErrorLog, watching_kafka_python
from tests.support.confluent_ops import consume_all, create_topic
from tests.support.group_clients import HEARTBEAT_MS, ClientKind, Group, wait_until
from tests.support.kafka_python_stall import DEBUG_LOG, form
from tests.support.postgres import PostgresCluster
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

TOPIC = "pg-outage"
PARTITIONS = 3
MESSAGES = 3000
DEADLINE_S = 60.0
SESSION_MS = 10_000
COMMITTER_GROUP = "pg-outage-group"
MEMBERS = [
    ClientKind("confluent", "confluent"),
    ClientKind("kafka-python", "kafka-python"),
    ClientKind("aiokafka", "aiokafka"),
]


class ConfluentProducer(threading.Thread):
    """Produces MESSAGES values with acks=all at a steady pace; keeps what was acknowledged."""

    def __init__(self, bootstrap: str, errors: ErrorLog) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.errors = errors
        self.acknowledged: dict[bytes, tuple[int, int]] = {}
        self.failed: list[str] = []
        self.sent = 0

    def run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "error_cb": lambda error: self.errors.confluent("error_cb", error),
            }
        )

        def delivered(err: KafkaError | None, msg: object) -> None:
            if err is not None:
                self.errors.confluent("delivery", err)
                self.failed.append(str(err))
                return
            value, partition, offset = msg.value(), msg.partition(), msg.offset()  # type: ignore[attr-defined]
            assert isinstance(value, bytes)
            self.acknowledged[value] = (partition, offset)

        for i in range(MESSAGES):
            producer.produce(TOPIC, value=f"c{i}".encode(), partition=i % PARTITIONS, on_delivery=delivered)
            self.sent += 1
            producer.poll(0)
            time.sleep(0.002)
        producer.flush(DEADLINE_S)


class KafkaPythonProducer(threading.Thread):
    """kafka-python sends MESSAGES // 3 values with acks=all; exceptions go to the error log."""

    def __init__(self, bootstrap: str, errors: ErrorLog) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.errors = errors
        self.acknowledged: dict[bytes, tuple[int, int]] = {}
        self.failed: list[str] = []

    def run(self) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            linger_ms=5,
            retries=1_000,
            request_timeout_ms=30_000,
        )
        futures = []
        for i in range(MESSAGES // 3):
            value = f"k{i}".encode()
            futures.append((value, producer.send(TOPIC, value=value, partition=i % PARTITIONS)))
            time.sleep(0.006)
        producer.flush(DEADLINE_S)
        for value, future in futures:
            try:
                metadata = future.get(timeout=DEADLINE_S)
            except Exception as exc:  # every failure is recorded and classified
                self.errors.exception("kafka-python", "send", exc)
                self.failed.append(repr(exc))
            else:
                self.acknowledged[value] = (metadata.partition, metadata.offset)
        producer.close(timeout=10)


class Committer(threading.Thread):
    """A standalone confluent-kafka committer: commits offset 1, 2, 3, ... to every partition every
    50 ms until stopped, recording every error; keeps the last offset that was accepted."""

    def __init__(self, bootstrap: str, errors: ErrorLog) -> None:
        super().__init__(daemon=True)
        self.errors = errors
        self.stop = threading.Event()
        self.accepted: list[tuple[float, int]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": COMMITTER_GROUP,
                "error_cb": lambda error: errors.confluent("error_cb", error),
            }
        )

    def run(self) -> None:
        offset = 0
        try:
            while not self.stop.is_set():
                offset += 1
                if self.commit(offset):
                    self.accepted.append((time.monotonic(), offset))
                time.sleep(0.05)
        finally:
            self.consumer.close()

    def commit(self, offset: int) -> bool:
        try:
            answers = self.consumer.commit(
                offsets=[TopicPartition(TOPIC, p, offset) for p in range(PARTITIONS)], asynchronous=False
            )
        except KafkaException as exc:
            self.errors.confluent("commit", exc.args[0])
            return False
        failed = [tp for tp in answers or [] if tp.error is not None]
        for tp in failed:
            self.errors.confluent("commit", tp.error)
        return not failed


# The database goes away under load: writes, log recoveries and offsets appends fail until it is
# back (asyncpg's pool retrying its reconnection is a warning).
@pytest.mark.server_log_allows(
    "log.write_failed",
    "log.recovery_failed",
    "offsets_log.append_failed",
)
@pytest.mark.slow
def test_a_postgresql_restart_under_load_gives_only_retriable_errors_and_loses_nothing(
    kcoord_factory: type[KcoordProcess], postgres_cluster: PostgresCluster, tmp_path: Path
) -> None:
    """Producers, a three-client group and a committer run through ``pg_ctl restart``: each error
    they report is retriable, every acknowledged record is consumed and survives, commits work
    again, and the kcoord process never restarted."""
    url = postgres_cluster.create_database("outage")
    server = kcoord_factory(tmp_path / "data", DEBUG_LOG, extra_args=["--storage", url]).start()
    create_topic(server.bootstrap, TOPIC, PARTITIONS)
    errors = ErrorLog()
    group = Group(server, TOPIC, "pg-outage-members", PARTITIONS)
    committer = Committer(server.bootstrap, errors)
    try:
        for kind in MEMBERS:
            group.start(kind, session_timeout_ms=SESSION_MS)
        form(group, session_timeout_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS, timeout=60)
        load_started = time.monotonic()
        committer.start()
        wait_until(lambda: bool(committer.accepted), DEADLINE_S, "a first commit")
        with watching_kafka_python(errors):
            confluent = ConfluentProducer(server.bootstrap, errors)
            kafka_python = KafkaPythonProducer(server.bootstrap, errors)
            confluent.start()
            kafka_python.start()
            wait_until(lambda: confluent.sent >= MESSAGES // 3, DEADLINE_S, "a third of the load sent")
            restarted_at = time.monotonic()
            with group.fault_window():  # the database restarts: until every member commits again
                postgres_cluster.restart()
                confluent.join(DEADLINE_S + 10)
                kafka_python.join(DEADLINE_S + 10)
                assert not confluent.is_alive() and not kafka_python.is_alive()
                acknowledged = {**confluent.acknowledged, **kafka_python.acknowledged}
                group.wait_consumed(set(acknowledged.values()), timeout=DEADLINE_S)
                wait_until(
                    lambda: all(d.of_kind("committed", since=restarted_at) for d in group.live),
                    DEADLINE_S,
                    "every member commits again after the restart",
                )
        wait_until(lambda: committer.accepted[-1][0] > restarted_at, DEADLINE_S, "commits accepted again")
        assert len(group.live) == len(MEMBERS), group.diagnose()
        errors.from_drivers(group.drivers, since=load_started)
    finally:
        committer.stop.set()
        committer.join(DEADLINE_S)
        group.stop_all()

    errors.assert_only_retriable()
    assert not confluent.failed and not kafka_python.failed, (confluent.failed[:5], kafka_python.failed[:5])
    assert len(confluent.acknowledged) == MESSAGES and len(kafka_python.acknowledged) == MESSAGES // 3
    assert server.proc is not None and server.proc.poll() is None, "kcoord needed a restart"
    assert server.events("log.write_failed"), "the restart never reached a write"
    assert server.events("log.recovered")

    server.kill()
    server.start()
    total = len(acknowledged)
    values = {c.value for c in consume_all(server.bootstrap, TOPIC, total, PARTITIONS)}
    assert set(acknowledged) <= values
    reader = Consumer({"bootstrap.servers": server.bootstrap, "group.id": COMMITTER_GROUP})
    try:
        stored = reader.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        reader.close()
    last_accepted = committer.accepted[-1][1]
    assert [tp.offset for tp in stored] == [last_accepted] * PARTITIONS
