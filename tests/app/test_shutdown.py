"""Graceful shutdown: SIGTERM stops accepting, answers what was read, flushes, exits 0."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients


def _consume_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    seen = [(m.partition, m.offset, m.value) for m in consumer]
    consumer.close()
    return seen


def test_sigterm_exits_zero_and_keeps_acknowledged_data(tmp_path: Path) -> None:
    """Records acknowledged before SIGTERM are all there after a restart, and the exit code is 0."""
    server = KcoordProcess(tmp_path / "data", {"num.partitions": "3", "log.flush.policy": "interval"}).start()
    try:
        producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=2)
        futures = [producer.send("shutdown-topic", key=b"k%d" % i, value=b"v%d" % i) for i in range(3000)]
        producer.flush()
        acknowledged = {(f.get().partition, f.get().offset) for f in futures}
        producer.close()

        started = time.monotonic()
        assert server.terminate(timeout=30) == 0
        assert time.monotonic() - started < 15
        assert server.events("kcoord.stopped"), "no kcoord.stopped log line"

        server.start()
        seen = _consume_all(server.bootstrap, "shutdown-topic", 3)
        assert {(p, o) for p, o, _ in seen} == acknowledged
    finally:
        server.kill()


def test_sigterm_with_a_parked_join_exits_promptly(tmp_path: Path) -> None:
    """A JoinGroup parked in the coordinator does not hold the shutdown past its bound."""
    server = KcoordProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": "60000"}).start()
    try:
        consumer = KafkaConsumer(
            "parked-topic",
            bootstrap_servers=server.bootstrap,
            group_id="parked",
            request_timeout_ms=70000,
            session_timeout_ms=10000,
            heartbeat_interval_ms=1000,
            max_poll_interval_ms=65000,
        )
        consumer.poll(2000)  # JoinGroup now waits out the 60 s initial delay
        started = time.monotonic()
        assert server.terminate(timeout=30) == 0
        assert time.monotonic() - started < 12
        consumer.close(autocommit=False)
    finally:
        server.kill()
