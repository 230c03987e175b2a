"""The partition runner: replay on load (yielding as it goes), append-then-release, and failures.

The runner is driven on a real event loop against a hand-written partition log that assigns
offsets like a real one, can hold appends back (to see that nothing is released early) and can
fail them; the shard is a recording fake.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

import pytest
from kio.records.readers import read_batch
from kio.schema.errors import ErrorCode

from kcoord.coordinator.record_codec import decode_record, encode_key, encode_value
from kcoord.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.plain_batch import EncodedBatch
from kcoord.runtime.group_coordinator import GROUP_COORDINATOR
from kcoord.runtime.runner import (
    PartitionRunner,
    PartitionState,
    PrefixedTimer,
    Sink,
    split_timer_key,
)
from kcoord.timer.clock import ManualClock
from tests.support.batches import build_batch

NOW_MS = 1_700_000_000_000


def offset_record(group: str, partition: int, offset: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        OffsetCommitKey(group, "orders", partition),
        OffsetCommitValue(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=NOW_MS),
    )


def group_record(group: str, generation: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        GroupMetadataKey(group),
        GroupMetadataValue("consumer", generation, "range", None, NOW_MS, members=()),
    )


class FakeLog:
    """A partition log in a list: assigns offsets in call order; appends can be held or failed."""

    def __init__(self, *, one_batch_per_read: bool = False) -> None:
        self.batches: list[tuple[int, bytes]] = []
        self.end = 0
        self.gate: asyncio.Event | None = None
        self.fail_with: Exception | None = None
        self.reads = 0
        self.read_failures = 0
        """How many of the next reads raise (a load that fails)."""
        self._one_batch_per_read = one_batch_per_read

    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def log_end_offset(self) -> int:
        return self.end

    def put(self, records: list[CoordinatorRecord]) -> None:
        """Store a batch as if appended earlier (for loading)."""
        batch = bytearray(GROUP_COORDINATOR.serde.encode_batch(records, NOW_MS).data)
        struct.pack_into(">q", batch, 0, self.end)
        self.batches.append((self.end, bytes(batch)))
        self.end += len(records)

    def put_raw(self, batch: bytes, count: int) -> None:
        patched = bytearray(batch)
        struct.pack_into(">q", patched, 0, self.end)
        self.batches.append((self.end, bytes(patched)))
        self.end += count

    def append_soon(self, batch: bytes | EncodedBatch, on_written: Callable[..., None] | None = None) -> None:
        """Always the slow path, so the gate and the injected faults apply."""

    async def append(self, batch: bytes) -> Any:
        count = struct.unpack_from(">i", batch, 57)[0]
        base = self.end
        self.end += count
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        patched = bytearray(batch)
        struct.pack_into(">q", patched, 0, base)
        self.batches.append((base, bytes(patched)))
        return None

    async def read_async(self, offset: int, max_bytes: int) -> bytes:
        return self.read(offset, max_bytes)

    def read(self, offset: int, max_bytes: int) -> bytes:
        self.reads += 1
        if self.read_failures:
            self.read_failures -= 1
            raise OSError("read failed")
        out = b""
        for base, data in self.batches:
            count = struct.unpack_from(">i", data, 57)[0]
            if base + count <= offset:
                continue
            out += data
            if self._one_batch_per_read or len(out) >= max_bytes:
                break
        return out

    async def truncate_to(self, offset: int) -> None:
        self.batches = [(base, data) for base, data in self.batches if base < offset]
        self.end = offset

    def appended_records(self) -> list[CoordinatorRecord]:
        records = []
        for _, data in self.batches:
            batch, _ = read_batch(data, 0)
            for record in batch.records:
                assert record.key is not None
                decoded = decode_record(record.key, record.value)
                assert decoded is not None
                records.append(decoded)
        return records


class FakeShard:
    """Records what the runner hands it; ``on_loaded``/``unload`` return prepared results."""

    def __init__(self) -> None:
        self.replayed: list[CoordinatorRecord] = []
        self.replayed_at: list[tuple[int, int, int]] = []
        """(offset, producer id, producer epoch) of each replayed record."""
        self.markers: list[tuple[int, int, bool]] = []
        self.appended: list[list[CoordinatorRecord]] = []
        self.loaded_at: int | None = None
        self.on_loaded_result = CoordinatorResult()
        self.unload_result = CoordinatorResult()
        self.unloaded = False
        self.timers: list[tuple[str, int]] = []

    def replay(self, record: CoordinatorRecord, offset: int, producer_id: int, producer_epoch: int) -> None:
        self.replayed.append(record)
        self.replayed_at.append((offset, producer_id, producer_epoch))

    def replay_end_transaction_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        self.markers.append((producer_id, producer_epoch, committed))

    def on_appended(self, records: list[CoordinatorRecord]) -> None:
        self.appended.append(list(records))

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        self.loaded_at = now_ms
        return self.on_loaded_result

    def on_timer(self, key: str, now_ms: int) -> CoordinatorResult:
        self.timers.append((key, now_ms))
        return CoordinatorResult()

    def unload(self) -> CoordinatorResult:
        self.unloaded = True
        return self.unload_result


def make_runner(log: FakeLog | None = None) -> tuple[PartitionRunner, FakeShard, FakeLog]:
    shard = FakeShard()
    log = log or FakeLog()
    runner = PartitionRunner(3, shard, log, ManualClock(NOW_MS), serde=GROUP_COORDINATOR.serde)  # type: ignore[arg-type]
    return runner, shard, log


async def loaded_runner() -> tuple[PartitionRunner, FakeShard, FakeLog]:
    runner, shard, log = make_runner()
    await runner.load()
    return runner, shard, log


async def test_load_replays_every_record_in_log_order_then_activates() -> None:
    """Loading replays each stored record once, in offset order, then calls on_loaded and goes ACTIVE."""
    runner, shard, log = make_runner()
    stored = [offset_record("g1", 0, 5), group_record("g1", 3), offset_record("g2", 1, 9)]
    log.put(stored[:2])
    log.put(stored[2:])
    await runner.load()
    assert shard.replayed == stored
    assert shard.loaded_at == NOW_MS
    assert runner.state is PartitionState.ACTIVE
    assert (runner.load_stats.records, runner.load_stats.batches, runner.load_stats.skipped) == (3, 2, 0)


async def test_load_of_an_empty_log_activates_without_replay() -> None:
    """An empty partition loads at once: no replay, on_loaded still runs."""
    runner, shard, _ = await loaded_runner()
    assert shard.replayed == [] and shard.loaded_at == NOW_MS
    assert runner.state is PartitionState.ACTIVE


async def test_load_replays_tombstones_and_skips_records_it_cannot_read() -> None:
    """A tombstone is replayed with value None; a keyless record or an unknown key version is skipped."""
    runner, shard, log = make_runner()
    tombstone = CoordinatorRecord(OffsetCommitKey("g", "orders", 0), None)
    log.put([offset_record("g", 0, 1), tombstone])
    value = encode_value(offset_record("g", 0, 2).value)
    log.put_raw(build_batch([(None, value), (b"\x00\x63unknown", value)], timestamp_ms=NOW_MS), 2)
    log.put([offset_record("g", 0, 3)])
    await runner.load()
    assert shard.replayed == [offset_record("g", 0, 1), tombstone, offset_record("g", 0, 3)]
    assert (runner.load_stats.records, runner.load_stats.skipped) == (3, 2)


async def test_replay_gets_each_record_offset_and_its_batch_producer_and_the_markers() -> None:
    """Loading hands replay the record's offset and its batch's producer id and epoch, and a control
    batch's commit or abort marker to replay_end_transaction_marker, not to replay."""
    runner, shard, log = make_runner()
    log.put([group_record("g", 1)])
    written = [
        (encode_key(r.key), encode_value(r.value)) for r in (group_record("g", 2), group_record("h", 1))
    ]
    log.put_raw(
        build_batch(written, timestamp_ms=NOW_MS, producer_id=9, producer_epoch=2, attributes=0x10), 2
    )
    commit_marker = build_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
        timestamp_ms=NOW_MS,
        producer_id=9,
        producer_epoch=2,
        attributes=0x30,
    )
    log.put_raw(commit_marker, 1)
    await runner.load()
    assert shard.replayed == [group_record("g", 1), group_record("g", 2), group_record("h", 1)]
    assert shard.replayed_at == [(0, -1, -1), (1, 9, 2), (2, 9, 2)]
    assert shard.markers == [(9, 2, True)]
    assert runner.load_stats.records == 3


async def test_load_yields_to_the_loop_and_answers_load_in_progress_meanwhile() -> None:
    """A long load gives the loop back every few thousand records; requests meanwhile get LOAD_IN_PROGRESS."""
    log = FakeLog(one_batch_per_read=True)
    for batch in range(50):
        log.put([offset_record("g", p, batch) for p in range(100)])
    runner, shard, _ = make_runner(log)
    seen: list[tuple[int, ErrorCode]] = []

    async def probe() -> None:
        while runner.state is PartitionState.LOADING:
            try:
                runner.run(lambda now: CoordinatorResult())
            except KafkaError as exc:
                seen.append((len(shard.replayed), exc.code))
            await asyncio.sleep(0)

    prober = asyncio.create_task(probe())
    await asyncio.sleep(0)
    await runner.load()
    await prober
    assert len(shard.replayed) == 5000
    assert seen, "the loop ran other tasks while loading"
    assert {code for _, code in seen} == {ErrorCode.coordinator_load_in_progress}
    assert any(0 < replayed < 5000 for replayed, _ in seen), "probed in the middle of the replay"


async def test_operation_without_records_is_answered_at_once() -> None:
    """A result with no records releases its responses synchronously, appending nothing."""
    runner, shard, log = await loaded_runner()
    sink = Sink()
    runner.run(lambda now: CoordinatorResult(responses=[(sink, ("answer", now))]))
    assert sink.done()
    assert await sink == ("answer", NOW_MS)
    assert log.batches == [] and shard.appended == []


async def test_response_is_released_only_after_its_records_are_appended() -> None:
    """Answer after durability: the sink waits for the append, and on_appended runs before the release."""
    runner, shard, log = await loaded_runner()
    log.gate = asyncio.Event()
    sink = Sink()
    records = [offset_record("g", 0, 7), offset_record("g", 1, 8)]
    runner.run(lambda now: CoordinatorResult(records=list(records), responses=[(sink, "committed")]))
    await asyncio.sleep(0.01)
    assert not sink.done() and shard.appended == []
    log.gate.set()
    assert await asyncio.wait_for(sink, 1) == "committed"
    assert shard.appended == [records]
    assert log.appended_records() == records


async def test_appends_keep_operation_order() -> None:
    """Two writes in a row are appended in the order they ran and answered in that order."""
    runner, shard, log = await loaded_runner()
    first, second = Sink(), Sink()
    released: list[str] = []
    runner.run(
        lambda now: CoordinatorResult(records=[offset_record("g", 0, 1)], responses=[(first, "first")])
    )
    runner.run(
        lambda now: CoordinatorResult(records=[offset_record("g", 0, 2)], responses=[(second, "second")])
    )
    for sink in (first, second):
        released.append(await asyncio.wait_for(sink, 1))
    assert released == ["first", "second"]
    assert [r.value.offset for r in log.appended_records()] == [1, 2]  # type: ignore[union-attr]
    assert [len(batch) for batch in shard.appended] == [1, 1]


async def test_failed_append_fails_the_waiting_requests() -> None:
    """A failed append answers NOT_COORDINATOR (Kafka's answer to a storage error) and applies nothing."""
    runner, shard, log = await loaded_runner()
    log.fail_with = OSError("disk full")
    sink = Sink()
    runner.run(lambda now: CoordinatorResult(records=[offset_record("g", 0, 1)], responses=[(sink, "ok")]))
    with pytest.raises(KafkaError) as raised:
        await asyncio.wait_for(sink, 1)
    assert raised.value.code == ErrorCode.not_coordinator
    assert shard.appended == []


async def test_an_exception_as_response_fails_its_sink() -> None:
    """A result may answer a sink with an exception; the waiting request then raises it."""
    runner, _, _ = await loaded_runner()
    sink = Sink()
    runner.run(lambda now: CoordinatorResult(responses=[(sink, KafkaError(ErrorCode.not_coordinator))]))
    with pytest.raises(KafkaError) as raised:
        await sink
    assert raised.value.code == ErrorCode.not_coordinator


async def test_on_loaded_result_is_appended_and_released() -> None:
    """What on_loaded returns (records and answers) goes through the same append-then-release path."""
    runner, shard, log = make_runner()
    sink = Sink()
    shard.on_loaded_result = CoordinatorResult(records=[group_record("g", 2)], responses=[(sink, "armed")])
    await runner.load()
    assert await asyncio.wait_for(sink, 1) == "armed"
    assert log.appended_records() == [group_record("g", 2)]


async def test_close_unloads_the_shard_and_refuses_later_operations() -> None:
    """Close fails parked requests via unload, waits for appends; later writes get NOT_COORDINATOR."""
    runner, shard, log = await loaded_runner()
    parked = Sink()
    shard.unload_result = CoordinatorResult(responses=[(parked, KafkaError(ErrorCode.not_coordinator))])
    log.gate = asyncio.Event()
    pending = Sink()
    runner.run(lambda now: CoordinatorResult(records=[offset_record("g", 0, 1)], responses=[(pending, "ok")]))
    asyncio.get_running_loop().call_later(0.01, log.gate.set)
    await runner.close()
    assert shard.unloaded and runner.state is PartitionState.CLOSED
    assert pending.done(), "close waited for the in-flight append"
    with pytest.raises(KafkaError) as raised:
        await parked
    assert raised.value.code == ErrorCode.not_coordinator
    with pytest.raises(KafkaError) as refused:
        runner.run(lambda now: CoordinatorResult())
    assert refused.value.code == ErrorCode.not_coordinator


async def test_closing_while_loading_does_not_unload() -> None:
    """A partition closed before it finished loading has nothing to unload."""
    runner, shard, _ = make_runner()
    await runner.close()
    assert not shard.unloaded and runner.state is PartitionState.CLOSED


def test_prefixed_timer_keys_carry_the_partition() -> None:
    """A shard's timer keys are stored with its partition in front, and split back into (partition, key)."""

    class DictTimer:
        def __init__(self) -> None:
            self.deadlines: dict[str, int] = {}

        def schedule(self, key: str, deadline_ms: int) -> None:
            self.deadlines[key] = deadline_ms

        def cancel(self, key: str) -> None:
            self.deadlines.pop(key, None)

        def deadline(self, key: str) -> int | None:
            return self.deadlines.get(key)

    wheel = DictTimer()
    timer = PrefixedTimer(wheel, 12)
    timer.schedule("session:g:m|1", 500)
    assert wheel.deadlines == {"12|session:g:m|1": 500}
    assert timer.deadline("session:g:m|1") == 500
    assert split_timer_key("12|session:g:m|1") == (12, "session:g:m|1")
    timer.cancel("session:g:m|1")
    assert wheel.deadlines == {} and timer.deadline("session:g:m|1") is None
