"""The partition runner's failure paths, each with an injected fault: what the callers are answered and
what state the partition is left in (always exactly what its log holds)."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode
from structlog.testing import capture_logs

from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import KafkaError
from kcoord.runtime.group_coordinator import GROUP_COORDINATOR
from kcoord.runtime.runner import PartitionRunner, PartitionState, Sink
from kcoord.timer.clock import ManualClock
from tests.runtime.test_runner import FakeLog, FakeShard, offset_record

NOW_MS = 1_700_000_000_000


class RecordingObserver:
    """Counts what the runtime reports."""

    def __init__(self) -> None:
        self.loaded: list[int] = []
        self.load_failures: list[int] = []
        self.append_failures: list[int] = []

    def partition_loaded(self, partition: int, records: int, seconds: float) -> None:
        self.loaded.append(partition)

    def load_failed(self, partition: int) -> None:
        self.load_failures.append(partition)

    def append_failed(self, partition: int) -> None:
        self.append_failures.append(partition)


def runner_with_factory(
    log: FakeLog, *, append_timeout_ms: int = 5000
) -> tuple[PartitionRunner, list[FakeShard], RecordingObserver]:
    shards: list[FakeShard] = []

    def new_shard() -> FakeShard:
        shards.append(FakeShard())
        return shards[-1]

    observer = RecordingObserver()
    runner = PartitionRunner(
        3,
        new_shard(),
        log,  # type: ignore[arg-type]
        ManualClock(NOW_MS),
        serde=GROUP_COORDINATOR.serde,
        shard_factory=new_shard,
        observer=observer,
        append_timeout_ms=append_timeout_ms,
    )
    return runner, shards, observer


async def wait_for_state(runner: PartitionRunner, state: PartitionState) -> None:
    """Poll the runner's state (it changes inside the runner's own tasks), for at most 5 s."""
    for _ in range(1000):
        if runner.state is state:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"partition still {runner.state}, expected {state}")


async def test_a_failing_load_marks_the_partition_failed_and_is_retried_with_backoff() -> None:
    """A load that raises: FAILED (COORDINATOR_NOT_AVAILABLE), logged and counted, retried until it works."""
    log = FakeLog()
    log.put([offset_record("g", 0, 5)])
    log.read_failures = 2
    runner, shards, observer = runner_with_factory(log)
    with capture_logs() as logs:
        loading = asyncio.create_task(runner.load())
        await wait_for_state(runner, PartitionState.FAILED)
        with pytest.raises(KafkaError) as refused:
            runner.run(lambda now: CoordinatorResult())
        assert refused.value.code == ErrorCode.coordinator_not_available
        await asyncio.wait_for(loading, 5)
    assert runner.state is PartitionState.ACTIVE and runner.load_attempts == 3
    assert observer.load_failures == [3, 3] and observer.loaded == [3]
    failures = [entry for entry in logs if entry["event"] == "offsets_partition.load_failed"]
    assert [entry["retry_in_ms"] for entry in failures] == [100, 200]
    assert shards[-1].replayed == [offset_record("g", 0, 5)], "the retry replays into a fresh shard"


async def test_a_corrupt_batch_in_the_middle_truncates_the_log_at_the_last_good_batch() -> None:
    """A bad CRC mid-log: the log is cut there, the drop is logged, the state is the prefix kept."""
    log = FakeLog()
    log.put([offset_record("g", 0, 1)])
    log.put([offset_record("g", 0, 2), offset_record("g", 1, 2)])
    log.put([offset_record("g", 0, 3)])
    base, data = log.batches[1]
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF
    log.batches[1] = (base, bytes(corrupt))
    runner, shards, _ = runner_with_factory(log)
    with capture_logs() as logs:
        await runner.load()
    assert runner.state is PartitionState.ACTIVE
    assert shards[0].replayed == [offset_record("g", 0, 1)]
    assert log.end == 1 and len(log.batches) == 1
    (dropped,) = [entry for entry in logs if entry["event"] == "offsets_log.corrupt_batch_truncated"]
    assert dropped["offset"] == 1 and dropped["dropped_offsets"] == 3
    assert runner.load_stats.truncated_at == 1


async def test_a_failed_append_reloads_the_partition_from_its_log_and_later_appends_succeed() -> None:
    """After a failed append the shard is rebuilt from the log (the failed records are not in it)."""
    log = FakeLog()
    log.put([offset_record("g", 0, 1)])
    runner, shards, observer = runner_with_factory(log)
    await runner.load()
    log.fail_with = OSError("disk full")
    failed, also_failed = Sink(), Sink()
    runner.run(lambda now: CoordinatorResult(records=[offset_record("g", 0, 2)], responses=[(failed, "ok")]))
    runner.run(
        lambda now: CoordinatorResult(records=[offset_record("g", 1, 2)], responses=[(also_failed, "ok")])
    )
    for sink in (failed, also_failed):
        with pytest.raises(KafkaError) as raised:
            await asyncio.wait_for(sink, 1)
        assert raised.value.code == ErrorCode.not_coordinator
    assert observer.append_failures == [3]
    assert shards[0].unloaded, "parked requests of the old shard are answered"
    log.fail_with = None
    await wait_for_state(runner, PartitionState.ACTIVE)
    assert len(shards) == 2 and shards[1].replayed == [offset_record("g", 0, 1)]
    later = Sink()
    runner.run(lambda now: CoordinatorResult(records=[offset_record("g", 0, 3)], responses=[(later, "ok")]))
    assert await asyncio.wait_for(later, 1) == "ok"
    assert shards[1].appended == [[offset_record("g", 0, 3)]]


async def test_an_append_slower_than_the_commit_timeout_answers_request_timed_out() -> None:
    """offsets.commit.timeout.ms: an append not durable in time answers REQUEST_TIMED_OUT."""
    log = FakeLog()
    runner, shards, _ = runner_with_factory(log, append_timeout_ms=20)
    await runner.load()
    log.gate = asyncio.Event()
    sink = Sink()
    runner.run(lambda now: CoordinatorResult(records=[offset_record("g", 0, 1)], responses=[(sink, "ok")]))
    with pytest.raises(KafkaError) as raised:
        await asyncio.wait_for(sink, 1)
    assert raised.value.code == ErrorCode.request_timed_out
    log.gate.set()
    await runner.close()
    assert shards[0].appended == [[offset_record("g", 0, 1)]], "records that land late still count"


async def test_each_batch_times_out_at_its_own_deadline_and_an_answered_one_never_does() -> None:
    """One sweeping timer per partition: a later batch still times out at its own deadline, not sooner."""
    log = FakeLog()
    runner, _, _ = runner_with_factory(log, append_timeout_ms=200)
    await runner.load()
    answered = Sink()
    runner.run(lambda now: CoordinatorResult(records=[offset_record("g", 0, 1)], responses=[(answered, 1)]))
    assert await asyncio.wait_for(answered, 1) == 1
    log.gate = asyncio.Event()
    loop = asyncio.get_running_loop()
    first, second = Sink(), Sink()
    started = loop.time()
    runner.run(lambda now: CoordinatorResult(records=[offset_record("g", 0, 2)], responses=[(first, "ok")]))
    await asyncio.sleep(0.1)
    runner.run(lambda now: CoordinatorResult(records=[offset_record("g", 0, 3)], responses=[(second, "ok")]))
    timed_out_at: list[float] = []
    for sink in (first, second):
        with pytest.raises(KafkaError) as raised:
            await asyncio.wait_for(sink, 2)
        assert raised.value.code == ErrorCode.request_timed_out
        timed_out_at.append(loop.time() - started)
    assert 0.19 <= timed_out_at[0] < 0.29 and timed_out_at[1] >= 0.29, timed_out_at
    assert answered.result() == 1, "the sweep passed the batch answered before it"
    log.gate.set()
    await runner.close()


async def test_records_that_cannot_be_encoded_are_answered_and_the_partition_reloads() -> None:
    """A group id too long for the record's string: UNKNOWN_SERVER_ERROR, never silence, and a reload."""
    log = FakeLog()
    runner, shards, _ = runner_with_factory(log)
    await runner.load()
    sink = Sink()
    too_long = offset_record("g" * 40_000, 0, 1)
    with capture_logs() as logs:
        runner.run(lambda now: CoordinatorResult(records=[too_long], responses=[(sink, "ok")]))
        with pytest.raises(KafkaError) as raised:
            await asyncio.wait_for(sink, 1)
    assert raised.value.code == ErrorCode.unknown_server_error
    assert any(entry["event"] == "offsets_log.record_encoding_failed" for entry in logs)
    await wait_for_state(runner, PartitionState.ACTIVE)
    assert len(shards) == 2 and log.batches == []
