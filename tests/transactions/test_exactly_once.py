"""Acceptance 1 of issue 17 (reduced): a confluent-kafka consume-transform-produce pipeline copies
10,000 records exactly once while kcoord is SIGKILLed in the middle of one of its transactions."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, read_all
from tests.transactions.pipeline import Pipeline

pytestmark = pytest.mark.clients

SOURCE, SINK, PARTITIONS = "eos-in", "eos-out", 3
RECORDS = 10_000


def fill_source(bootstrap: str) -> list[bytes]:
    values = [b"r%05d" % i for i in range(RECORDS)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for i, value in enumerate(values):
        while True:
            try:
                producer.produce(SOURCE, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(DEADLINE_S) == 0
    return values


def test_a_pipeline_copies_every_record_exactly_once_across_a_kcoord_sigkill(tmp_path: Path) -> None:
    """Every input record reaches read_committed readers of the output exactly once, though kcoord was
    killed (SIGKILL) between a transaction's records and its commit."""
    kcoord = KcoordProcess(
        tmp_path / "data", {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
    )
    kcoord.start()
    try:
        create_topic(kcoord.bootstrap, SOURCE, partitions=PARTITIONS)
        create_topic(kcoord.bootstrap, SINK, partitions=PARTITIONS)
        values = fill_source(kcoord.bootstrap)
        pipeline = Pipeline(kcoord.bootstrap, SOURCE, SINK, "eos-group", "eos-pipeline")
        try:
            run = pipeline.copy(RECORDS, interrupt_after=RECORDS // 3, interrupt=kcoord.restart)
        finally:
            pipeline.close()
        copied = read_all(kcoord.bootstrap, SINK, PARTITIONS)
        assert run.interrupted, "kcoord was never killed"
        assert len(copied) == RECORDS, run
        assert sorted(copied) == sorted(b"out-" + v for v in values), run
    finally:
        kcoord.kill()
