"""Acceptance 1 of issue 17 (reduced sizes): a confluent-kafka consume-transform-produce pipeline copies
its input exactly once while kcoord (and, in the bigger run, the pipeline process) is SIGKILLed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, read_all
from tests.transactions.pipeline import NO_REBOOTSTRAP, Pipeline

pytestmark = pytest.mark.clients

SOURCE, SINK, PARTITIONS = "eos-in", "eos-out", 3
RECORDS = 10_000


def fill_source(bootstrap: str, records: int = RECORDS) -> list[bytes]:
    values = [b"r%06d" % i for i in range(records)]
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
        pipeline = Pipeline(kcoord.bootstrap, SOURCE, SINK, "eos-group", "eos-pipeline", PARTITIONS)
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


BIG_RECORDS = 30_000


def test_a_pipeline_copies_exactly_once_across_two_kcoord_and_two_pipeline_sigkills(tmp_path: Path) -> None:
    """Acceptance 1 at 30,000 records: kcoord is SIGKILLed twice and the pipeline process twice (each time
    restarted with the same transactional.id); read_committed readers of the output see every input
    record exactly once."""
    kcoord = KcoordProcess(
        tmp_path / "data", {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
    )
    kcoord.start()
    pipelines: list[subprocess.Popen[bytes]] = []

    def start_pipeline() -> None:
        args = [
            kcoord.bootstrap,
            SOURCE,
            SINK,
            "eos-big",
            "eos-big-pipeline",
            str(PARTITIONS),
            str(BIG_RECORDS),
        ]
        pipelines.append(
            subprocess.Popen(
                [sys.executable, "-m", "tests.transactions.pipeline", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        )

    progress = Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": "eos-big", **NO_REBOOTSTRAP})

    def wait_until_committed(count: int) -> None:
        deadline = time.monotonic() + 180
        partitions = [TopicPartition(SOURCE, p) for p in range(PARTITIONS)]
        while True:
            assert pipelines[-1].poll() is None, "the pipeline exited early"
            assert time.monotonic() < deadline, f"fewer than {count} records committed in 180 s"
            try:
                if sum(max(tp.offset, 0) for tp in progress.committed(partitions, 10)) >= count:
                    return
            except KafkaException:
                pass  # kcoord restarting
            time.sleep(0.2)

    try:
        create_topic(kcoord.bootstrap, SOURCE, partitions=PARTITIONS)
        create_topic(kcoord.bootstrap, SINK, partitions=PARTITIONS)
        values = fill_source(kcoord.bootstrap, BIG_RECORDS)
        start_pipeline()
        for share, fault in ((0.2, "kcoord"), (0.4, "pipeline"), (0.6, "kcoord"), (0.75, "pipeline")):
            wait_until_committed(int(BIG_RECORDS * share))
            if fault == "kcoord":
                kcoord.restart()
            else:
                pipelines[-1].send_signal(signal.SIGKILL)
                pipelines[-1].wait(10)
                start_pipeline()
        out, _ = pipelines[-1].communicate(timeout=300)
        assert pipelines[-1].returncode == 0, out
        copied = read_all(kcoord.bootstrap, SINK, PARTITIONS)
        assert len(copied) == BIG_RECORDS, out
        assert sorted(copied) == sorted(b"out-" + v for v in values), out
    finally:
        progress.close()
        for process in pipelines:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        kcoord.kill()
