"""The log contract, run against every engine (memory://, file://, postgresql://, and postgresql:// with a
cache of a few batches, whose reads mostly go to the database)."""

from __future__ import annotations

import asyncio

import pytest

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import iter_batches, parse_header, valid_prefix_length
from kcoord.storage import LogConfig, PartitionLog

from .helpers import T0_MS, BatchBuilder, ManualClock, StoreFactory

SMALL_SEGMENTS = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def offsets_in(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each batch in ``data``."""
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(data, verify_crc=True)]


async def fill(
    log: PartitionLog, make_batch: BatchBuilder, count: int, records: int = 1, size: int = 10
) -> None:
    for i in range(count):
        await log.append(make_batch([bytes([i % 256]) * size] * records, timestamps=[T0_MS + i] * records))


async def test_append_assigns_consecutive_offsets(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """Each append takes the next offsets and the log's leader epoch (0 alone); the stored batches carry
    them and read back whole."""
    store = await open_engine()
    log = await store.create("t", 0)
    first = await log.append(make_batch([b"a", b"b", b"c"]))
    second = await log.append(make_batch([b"d"]))
    assert (first.base_offset, first.last_offset) == (0, 2)
    assert (second.base_offset, second.last_offset) == (3, 3)
    assert first.log_append_time_ms == -1 and first.log_start_offset == 0
    assert log.log_end_offset == 4
    data = await log.read_async(0, 1 << 20)
    assert offsets_in(data) == [(0, 2), (3, 3)]
    assert valid_prefix_length(data, verify_crc=True) == len(data)
    assert log.leader_epoch == 0
    assert [header.partition_leader_epoch for _, header in iter_batches(data)] == [0, 0]


async def test_read_starts_at_the_batch_holding_the_offset(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """A read from the middle of a batch returns that whole batch first."""
    store = await open_engine()
    log = await store.create("t", 0)
    await log.append(make_batch([b"a", b"b", b"c"]))
    await log.append(make_batch([b"d", b"e"]))
    assert offsets_in(await log.read_async(1, 1 << 20)) == [(0, 2), (3, 4)]
    assert offsets_in(await log.read_async(4, 1 << 20)) == [(3, 4)]


async def test_read_returns_whole_batches_and_at_least_one(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """max_bytes cuts at batch boundaries, but a first batch larger than max_bytes still comes back."""
    store = await open_engine()
    log = await store.create("t", 0)
    await fill(log, make_batch, 5, size=100)
    one = len(await log.read_async(0, 1))
    assert offsets_in(await log.read_async(0, 1)) == [(0, 0)]
    assert offsets_in(await log.read_async(0, 2 * one + one // 2)) == [(0, 0), (1, 1)]
    assert offsets_in(await log.read_async(2, 0)) == [(2, 2)]


async def test_read_outside_the_log_is_out_of_range(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """The log end reads as empty; past the end or below the start raises OFFSET_OUT_OF_RANGE."""
    store = await open_engine()
    log = await store.create("t", 0)
    assert await log.read_async(0, 100) == b""
    await fill(log, make_batch, 2)
    assert await log.read_async(2, 100) == b""
    for offset in (3, -1):
        with pytest.raises(KafkaError) as caught:
            await log.read_async(offset, 100)
        assert caught.value.code == ErrorCode.offset_out_of_range


async def test_every_offset_is_found_across_segments_and_index_entries(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """With small segments and a dense index, every offset reads from the batch that holds it."""
    store = await open_engine(SMALL_SEGMENTS)
    log = await store.create("t", 0)
    await fill(log, make_batch, 60, records=2, size=20)
    assert log.log_end_offset == 120
    for offset in range(120):
        base = offset - offset % 2
        assert offsets_in(await log.read_async(offset, 1))[0] == (base, base + 1)


async def test_segments_roll_by_size(open_engine: StoreFactory, make_batch: BatchBuilder) -> None:
    """Appends past segment_bytes start a new segment; reads stop at a segment's end and resume."""
    store = await open_engine(SMALL_SEGMENTS)
    log = await store.create("t", 0)
    await fill(log, make_batch, 30, size=50)
    assert log.segment_count > 1
    seen: list[int] = []
    offset = 0
    while offset < log.log_end_offset:
        batches = offsets_in(await log.read_async(offset, 1 << 20))
        seen.extend(base for base, _ in batches)
        offset = batches[-1][1] + 1
    assert seen == list(range(30))


async def test_segments_roll_by_age(
    open_engine: StoreFactory, make_batch: BatchBuilder, clock: ManualClock
) -> None:
    """A segment older than segment_ms is rolled at the next append."""
    store = await open_engine(LogConfig(segment_ms=1000), clock)
    log = await store.create("t", 0)
    await fill(log, make_batch, 2)
    clock.advance(1000)
    await fill(log, make_batch, 1)
    assert log.segment_count == 2


async def test_timestamps_are_found(open_engine: StoreFactory, make_batch: BatchBuilder) -> None:
    """offset_for_timestamp finds the first batch reaching a time; max_timestamp the latest batch."""
    store = await open_engine(SMALL_SEGMENTS)
    log = await store.create("t", 0)
    assert log.max_timestamp() == (-1, -1)
    stamps = [T0_MS + 10 * i for i in range(40)]
    stamps[25] = T0_MS + 10_000
    for stamp in stamps:
        await log.append(make_batch([b"x" * 30], timestamps=[stamp]))
    assert log.offset_for_timestamp(T0_MS) == (0, T0_MS)
    assert log.offset_for_timestamp(T0_MS + 101) == (11, T0_MS + 110)
    assert log.offset_for_timestamp(T0_MS + 300) == (25, T0_MS + 10_000)
    assert log.offset_for_timestamp(T0_MS + 10_001) is None
    assert log.max_timestamp() == (25, T0_MS + 10_000)


async def test_log_append_time_stamps_batches(
    open_engine: StoreFactory, make_batch: BatchBuilder, clock: ManualClock
) -> None:
    """Under LogAppendTime the broker's time is returned and stored as the batch's max timestamp."""
    store = await open_engine(LogConfig(message_timestamp_type="LogAppendTime"), clock)
    log = await store.create("t", 0)
    clock.advance(5)
    result = await log.append(make_batch([b"a"], timestamps=[1]))
    assert result.log_append_time_ms == T0_MS + 5
    header = parse_header(await log.read_async(0, 100))
    assert header.is_log_append_time and header.max_timestamp == T0_MS + 5
    assert valid_prefix_length(await log.read_async(0, 100), verify_crc=True) > 0
    assert log.max_timestamp() == (0, T0_MS + 5)


async def test_truncate_to_drops_the_tail(open_engine: StoreFactory, make_batch: BatchBuilder) -> None:
    """Truncation removes the batch holding the offset and everything after; appends continue there."""
    store = await open_engine(SMALL_SEGMENTS)
    log = await store.create("t", 0)
    await fill(log, make_batch, 40, records=2, size=20)
    await log.truncate_to(31)
    assert log.log_end_offset == 30
    assert offsets_in(await log.read_async(28, 1 << 20))[-1] == (28, 29)
    result = await log.append(make_batch([b"new"]))
    assert result.base_offset == 30
    assert offsets_in(await log.read_async(30, 100)) == [(30, 30)]
    await log.truncate_to(1000)
    assert log.log_end_offset == 31


async def test_truncate_to_the_start_empties_the_log(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """Truncating to the log start leaves an empty log that assigns offsets from there."""
    store = await open_engine(SMALL_SEGMENTS)
    log = await store.create("t", 0)
    await fill(log, make_batch, 20)
    await log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert await log.read_async(0, 100) == b""
    assert (await log.append(make_batch([b"a"]))).base_offset == 0


async def test_delete_records_before_moves_the_log_start(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """DeleteRecords raises the log start (mid-segment too), never lowers it, and drops whole segments."""
    store = await open_engine(SMALL_SEGMENTS)
    log = await store.create("t", 0)
    await fill(log, make_batch, 40, size=40)
    segments_before = log.segment_count
    assert await log.delete_records_before(25) == 25
    assert log.log_start_offset == 25
    assert log.segment_count < segments_before
    assert offsets_in(await log.read_async(25, 1))[0] == (25, 25)
    with pytest.raises(KafkaError) as below:
        await log.read_async(24, 100)
    assert below.value.code == ErrorCode.offset_out_of_range
    assert await log.delete_records_before(10) == 25
    assert (await log.append(make_batch([b"next"]))).log_start_offset == 25


async def test_delete_records_before_the_end_and_past_it(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """Deleting up to the log end empties the log for reads; an offset past the end is out of range."""
    store = await open_engine(SMALL_SEGMENTS)
    log = await store.create("t", 0)
    await fill(log, make_batch, 10)
    with pytest.raises(KafkaError) as past:
        await log.delete_records_before(11)
    assert past.value.code == ErrorCode.offset_out_of_range
    assert await log.delete_records_before(10) == 10
    assert await log.read_async(10, 100) == b""
    assert (await log.append(make_batch([b"a"]))).base_offset == 10
    assert offsets_in(await log.read_async(10, 100)) == [(10, 10)]


async def test_retention_by_size_deletes_old_segments(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """Whole leading segments go while the rest still holds retention_bytes; the start offset moves."""
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100, retention_bytes=2500, retention_ms=-1)
    store = await open_engine(config)
    log = await store.create("t", 0)
    await fill(log, make_batch, 60, size=50)
    before = log.size_bytes
    deleted = await store.enforce_retention()
    assert deleted > 0
    assert 2500 <= log.size_bytes < before
    assert log.size_bytes - SMALL_SEGMENTS.segment_bytes < 2500
    assert log.log_start_offset > 0
    assert offsets_in(await log.read_async(log.log_start_offset, 100))[0][0] == log.log_start_offset
    with pytest.raises(KafkaError):
        await log.read_async(log.log_start_offset - 1, 100)
    assert log.log_end_offset == 60


async def test_retention_by_time_uses_the_clock(
    open_engine: StoreFactory, make_batch: BatchBuilder, clock: ManualClock
) -> None:
    """Segments whose newest batch is older than retention_ms go; with everything expired the log empties."""
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100, retention_ms=60_000)
    store = await open_engine(config, clock)
    log = await store.create("t", 0)
    await fill(log, make_batch, 20, size=50)
    assert await store.enforce_retention() == 0
    clock.advance(60_000 + 100)
    assert await store.enforce_retention() > 0
    assert (log.log_start_offset, log.log_end_offset) == (20, 20)
    assert await log.read_async(20, 100) == b""
    assert (await log.append(make_batch([b"a"]))).base_offset == 20


async def test_concurrent_appends_get_offsets_in_call_order(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """Thousands of appends started together get increasing offsets in call order and read back in order."""
    store = await open_engine(LogConfig(segment_bytes=64 * 1024))
    log = await store.create("t", 0)
    count = 2000
    batches = [make_batch([i.to_bytes(4, "big")]) for i in range(count)]
    results = await asyncio.gather(*(log.append(batch) for batch in batches))
    assert [r.base_offset for r in results] == list(range(count))
    values: list[int] = []
    offset = 0
    while offset < count:
        data = await log.read_async(offset, 1 << 20)
        for pos, header in iter_batches(data, verify_crc=True):
            values.append(int.from_bytes(data[pos + header.size - 5 : pos + header.size - 1], "big"))
            offset = header.next_offset
    assert values == list(range(count))


async def test_append_listener_sees_the_new_end(open_engine: StoreFactory, make_batch: BatchBuilder) -> None:
    """Listeners hear the new log end offset once data is readable, until they unregister."""
    store = await open_engine()
    log = await store.create("t", 0)
    heard: list[int] = []

    def listener(end: int) -> None:
        heard.append(end)
        assert log.read(end - 1, 100) != b""  # the tail just appended is at hand on every engine

    remove = log.add_append_listener(listener)
    await fill(log, make_batch, 2)
    remove()
    await fill(log, make_batch, 1)
    assert heard == [1, 2]


async def test_store_creates_lists_and_deletes(open_engine: StoreFactory, make_batch: BatchBuilder) -> None:
    """create is idempotent, partitions lists logs, delete_topic removes a topic's logs."""
    store = await open_engine()
    a0 = await store.create("a", 0)
    assert await store.create("a", 0, LogConfig(retention_ms=5)) is a0
    assert a0.config.retention_ms == 5
    await store.create("a", 1)
    await store.create("b-x", 0)
    assert store.partitions() == [("a", 0), ("a", 1), ("b-x", 0)]
    await fill(a0, make_batch, 1)
    await store.delete_topic("a")
    assert store.partitions() == [("b-x", 0)]
    assert store.get("a", 0) is None
    with pytest.raises(KafkaError):
        await a0.append(make_batch([b"late"]))
    fresh = await store.create("a", 0)
    assert fresh.log_end_offset == 0


async def test_a_failing_listener_does_not_break_appends(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """A listener that raises is logged and the append still succeeds for every caller."""
    store = await open_engine()
    log = await store.create("t", 0)

    def broken(end: int) -> None:
        raise RuntimeError("listener bug")

    log.add_append_listener(broken)
    results = await asyncio.gather(*(log.append(make_batch([b"x"])) for _ in range(3)))
    assert [r.base_offset for r in results] == [0, 1, 2]


async def test_a_closed_log_refuses_reads_and_appends(
    open_engine: StoreFactory, make_batch: BatchBuilder
) -> None:
    """After close both reads and appends raise KAFKA_STORAGE_ERROR."""
    store = await open_engine()
    log = await store.create("t", 0)
    await fill(log, make_batch, 1)
    await log.close()
    with pytest.raises(KafkaError) as caught:
        await log.read_async(0, 100)
    assert caught.value.code == ErrorCode.kafka_storage_error
    with pytest.raises(KafkaError):
        await log.append(make_batch([b"x"]))
