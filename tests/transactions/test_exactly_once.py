"""Acceptance 1 of issue 17: a consume-transform-produce pipeline copies its input exactly once while
kcoord (and, in the 100,000-record runs, the pipeline process) is SIGKILLed. The pipeline kills land
inside an open transaction whose output records are already in the log, so the killed pipelines leave
aborted records behind that read_committed readers must not see (the runs check that there were some)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, read_all
from tests.transactions.pipeline import Pipeline
from tests.transactions.pipeline_process import PipelineProcess

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


@pytest.mark.slow
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
            run = pipeline.copy(
                RECORDS, interrupt_at=[RECORDS // 3], interrupt=lambda committed: kcoord.restart()
            )
        finally:
            pipeline.close()
        copied = read_all(kcoord.bootstrap, SINK, PARTITIONS)
        assert run.interruptions == 1, "kcoord was never killed"
        assert len(copied) == RECORDS, run
        assert sorted(copied) == sorted(b"out-" + v for v in values), run
    finally:
        kcoord.kill()


BIG_RECORDS = 100_000


@dataclass(frozen=True)
class Fault:
    share: float
    """The share of the records committed when the fault is injected."""
    kill: str
    """``kcoord`` or ``pipeline``."""
    held: bool
    """Whether the kill lands inside an open transaction the pipeline holds (see
    :mod:`tests.transactions.pipeline_process`), or wherever the running pipeline is."""


class KillSchedule:
    """Runs a pipeline process (:class:`PipelineProcess`) and SIGKILLs kcoord or the pipeline inside the
    open transactions it holds at given shares of the copy; a killed pipeline is restarted with the
    same group and transactional.id (and the kill points still to come)."""

    def __init__(self, kcoord: KcoordProcess, module: str, logs: Path, records: int) -> None:
        self.kcoord, self.module, self.logs, self.records = kcoord, module, logs, records
        self.group, self.transactional_id = f"{module}-group", f"{module}-txn"
        self.pipelines: list[PipelineProcess] = []
        self.kills: list[tuple[str, int]] = []
        """(what was killed, records the pipeline had reported committed just before)."""

    def start_pipeline(self, hold_at: list[int]) -> PipelineProcess:
        args = [self.kcoord.bootstrap, SOURCE, SINK, self.group, self.transactional_id, str(PARTITIONS)]
        stderr = self.logs / f"pipeline-{len(self.pipelines)}.err"
        holds = ",".join(str(point) for point in hold_at)
        self.pipelines.append(PipelineProcess(self.module, [*args, str(self.records), holds], stderr))
        return self.pipelines[-1]

    def run(self, faults: Sequence[Fault], within_s: float = 300.0) -> str:
        """Inject each fault once the pipeline has committed its share of the records (inside the open
        transaction it holds there, when the fault is ``held``), then wait for the last pipeline to
        finish; its summary."""
        holds = [int(self.records * fault.share) for fault in faults if fault.held]
        pipeline = self.start_pipeline(holds)
        for fault in faults:
            point = int(self.records * fault.share)
            if fault.held:
                committed = pipeline.wait_open(within_s)
                holds.remove(point)
            else:
                committed = pipeline.wait_committed(point, within_s)
            self.kills.append((fault.kill, committed))
            if fault.kill == "kcoord":
                self.kcoord.restart()
                if fault.held:
                    pipeline.release()
            else:
                pipeline.kill()
                pipeline = self.start_pipeline(holds)
        return pipeline.finish(within_s)

    def close(self) -> None:
        for pipeline in self.pipelines:
            pipeline.kill()


TWO_AND_TWO = (
    Fault(0.2, "kcoord", held=True),
    Fault(0.4, "pipeline", held=True),
    Fault(0.6, "kcoord", held=False),
    Fault(0.75, "pipeline", held=True),
)
"""Three kills inside a held open transaction; the second kcoord kill lands wherever the running
pipeline is (consuming, producing, or in EndTxn with its markers being written)."""


def copy_exactly_once_through_kills(tmp_path: Path, module: str, records: int) -> None:
    """Acceptance 1's scenario with the pipeline ``module``: kcoord SIGKILLed twice and the pipeline
    twice; then read_committed readers of the output see every input record exactly once."""
    kcoord = KcoordProcess(
        tmp_path / "data", {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
    )
    kcoord.start()
    schedule = KillSchedule(kcoord, module, tmp_path, records)
    try:
        create_topic(kcoord.bootstrap, SOURCE, partitions=PARTITIONS)
        create_topic(kcoord.bootstrap, SINK, partitions=PARTITIONS)
        values = fill_source(kcoord.bootstrap, records)
        started = time.monotonic()
        summary = schedule.run(TWO_AND_TWO)
        elapsed = time.monotonic() - started
        copied = read_all(kcoord.bootstrap, SINK, PARTITIONS)
        written = read_all(kcoord.bootstrap, SINK, PARTITIONS, committed_only=False)
        recovered = [error for pipeline in schedule.pipelines for error in pipeline.recovered]
        kinds = Counter(error.split("(", 1)[0].split(":", 1)[0] for error in recovered)
        print(
            f"{module}: {records} records in {elapsed:.1f} s, {len(written)} written (read_uncommitted), "
            f"kills {schedule.kills}, {len(recovered)} client errors recovered {dict(kinds)}: "
            f"{recovered[:8]}, last run {summary}"
        )
        assert all(committed < records for _, committed in schedule.kills), schedule.kills
        assert len(written) > records, "the killed pipelines' open transactions left no aborted records"
        assert len(copied) == records, summary
        assert sorted(copied) == sorted(b"out-" + v for v in values), summary
    finally:
        schedule.close()
        kcoord.kill()


@pytest.mark.slow
def test_a_pipeline_copies_exactly_once_across_two_kcoord_and_two_pipeline_sigkills(tmp_path: Path) -> None:
    """Acceptance 1 (100,000 records) with confluent-kafka: kcoord is SIGKILLed twice and the pipeline
    process twice (each time restarted with the same transactional.id); read_committed readers of the
    output see every input record exactly once."""
    copy_exactly_once_through_kills(tmp_path, "tests.transactions.pipeline", BIG_RECORDS)


@pytest.mark.slow
def test_a_kafka_python_pipeline_copies_exactly_once_across_two_kcoord_and_two_pipeline_sigkills(
    tmp_path: Path,
) -> None:
    """Acceptance 1 (100,000 records) with kafka-python 3's transactional producer and read_committed
    consumer: two kcoord and two pipeline SIGKILLs, every input record in the output exactly once."""
    copy_exactly_once_through_kills(tmp_path, "tests.transactions.pipeline_kafka_python", BIG_RECORDS)


@pytest.mark.slow
def test_an_aiokafka_pipeline_copies_exactly_once_across_two_kcoord_and_two_pipeline_sigkills(
    tmp_path: Path,
) -> None:
    """Acceptance 1 (100,000 records) with aiokafka's transactional producer and read_committed consumer:
    two kcoord and two pipeline SIGKILLs, every input record in the output exactly once."""
    copy_exactly_once_through_kills(tmp_path, "tests.transactions.pipeline_aiokafka", BIG_RECORDS)
