"""A kcoord server on ``--storage postgresql://``: librdkafka produces, a group consumes and
commits, the server is SIGKILLed and restarted, and the group resumes from its commits with every
acknowledged record readable; every error the group's consumers report is retriable."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.client_errors import ErrorLog
from tests.support.clients import PARTITIONS, make_messages, verify_round_trip
from tests.support.confluent_ops import consume_all, create_topic, produce_all
from tests.support.postgres import PostgresCluster
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

GROUP = "pg-restart-group"
DEADLINE_S = 30.0


def group_consumer(bootstrap: str, topic: str, errors: ErrorLog) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "error_cb": lambda error: errors.confluent("error_cb", error),
        }
    )
    consumer.subscribe([topic])
    return consumer


def consume(consumer: Consumer, count: int, errors: ErrorLog) -> list[tuple[int, int]]:
    """(partition, offset) of the next ``count`` records (bounded in time); message errors are recorded."""
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < count and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=min(100, count - len(seen)), timeout=0.5):
            error = msg.error()
            if error is not None:
                errors.confluent("message", error)
                continue
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None
            seen.append((partition, offset))
    assert len(seen) == count, f"consumed {len(seen)} of {count}"
    return seen


def test_a_group_resumes_from_its_commits_after_sigkill(
    kcoord_factory: type[KcoordProcess], postgres_cluster: PostgresCluster, tmp_path: Path
) -> None:
    url = postgres_cluster.create_database("restart")
    server = kcoord_factory(
        tmp_path / "data", {"log.flush.policy": "always"}, extra_args=["--storage", url]
    ).start()
    topic = "pg-restart"
    create_topic(server.bootstrap, topic)
    messages = make_messages("pg-restart", count=2000)
    produce_all(server.bootstrap, topic, messages, "lz4")
    assert int(postgres_cluster.sql(url, "SELECT count(*) FROM log_batches WHERE topic = 'pg-restart'")) > 0

    errors = ErrorLog()
    first = group_consumer(server.bootstrap, topic, errors)
    try:
        consumed = consume(first, len(messages) // 2, errors)
        first.commit(asynchronous=False)
    finally:
        first.close()
    committed: dict[int, int] = {}
    for partition, offset in consumed:
        committed[partition] = max(committed.get(partition, 0), offset + 1)

    server.kill()
    server.start()

    second = group_consumer(server.bootstrap, topic, errors)
    try:
        stored = second.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=DEADLINE_S)
        assert {tp.partition: tp.offset for tp in stored if tp.offset >= 0} == committed
        rest = consume(second, len(messages) - len(consumed), errors)
    finally:
        second.close()
    errors.assert_only_retriable()
    firsts: dict[int, int] = {}
    for partition, offset in rest:
        firsts.setdefault(partition, offset)
    assert all(offset == committed.get(partition, 0) for partition, offset in firsts.items())
    assert sorted(consumed + rest) == sorted(set(consumed + rest)), "a record below a commit came back"

    verify_round_trip(messages, consume_all(server.bootstrap, topic, len(messages)))
    more = make_messages("pg-restart-after", count=50)
    produce_all(server.bootstrap, topic, more, "none")
    server.kill()
    server.start()
    everything = consume_all(server.bootstrap, topic, len(messages) + len(more))
    assert len(everything) == len(messages) + len(more)
