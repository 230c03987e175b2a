"""Log compaction (cleanup.policy=compact), run against every engine (memory://, file://, postgresql://)."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import struct
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch
from structlog.testing import capture_logs

from kcoord.protocol.control_batch import encode_marker_batch, encode_transactional_batch
from kcoord.protocol.record_batch import iter_batches, parse_header
from kcoord.storage import LogConfig, LogStore, PartitionLog, open_store
from kcoord.storage.compaction_records import DELETE_HORIZON_FLAG, decode_records
from kcoord.storage.log import SegmentedLog
from kcoord.storage.memory import MemoryLog
from kcoord.storage.segment import Segment, SegmentData

from .helpers import T0_MS, TINY_CACHE_BYTES, ManualClock

DAY_MS = 86_400_000
COMPACT = LogConfig(
    cleanup_policy="compact",
    segment_bytes=400,
    index_interval_bytes=64,
    retention_ms=-1,
    flush_policy="interval",
)

Record = tuple[bytes | None, bytes | None]
"""(key, value); a None value is a tombstone."""
Opener = Callable[..., Awaitable[LogStore]]


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _varbytes(value: bytes | None) -> bytes:
    return _varint(-1) if value is None else _varint(len(value)) + value


def keyed_batch(
    records: Sequence[Record], *, timestamp: int = T0_MS, gzipped: bool = False, transactional: bool = False
) -> bytes:
    """A magic-2 batch of keyed records, all stamped ``timestamp``, optionally gzip-compressed."""
    body = b""
    for delta, (key, value) in enumerate(records):
        inner = b"\x00" + _varint(0) + _varint(delta) + _varbytes(key) + _varbytes(value) + _varint(0)
        body += _varint(len(inner)) + inner
    if gzipped:
        body = gzip.compress(body)
    tail = struct.pack(
        ">hiqqqhii",
        (1 if gzipped else 0) | (0x10 if transactional else 0),
        len(records) - 1,
        timestamp,
        timestamp,
        -1,
        -1,
        -1,
        len(records),
    )
    tail += body
    return struct.pack(">qiibI", 0, len(tail) + 9, 0, 2, crc32c.crc32c(tail)) + tail


async def log_records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, read from the log start with kio's independent reader."""
    found: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = await log.read_async(offset, 1 << 20)
        if not data:
            break
        position = 0
        while position < len(data):
            batch, size = read_batch(data, position)
            found.extend((int(r.offset), r.key, r.value) for r in batch.records)
            offset = int(batch.base_offset) + int(batch.last_offset_delta) + 1
            position += size
    return found


def segmented(log: PartitionLog) -> SegmentedLog:
    """The engine's log behind the interface (both engines are segmented logs)."""
    assert isinstance(log, SegmentedLog)
    return log


def active_segment_base(log: PartitionLog) -> int:
    """Where the active segment starts (an engine internal)."""
    return segmented(log)._segments[-1].base_offset


def replay(records: Sequence[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes]:
    """The key -> value state a reader of the log rebuilds: later records win, tombstones delete."""
    state: dict[bytes | None, bytes] = {}
    for _, key, value in records:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


async def append_all(log: PartitionLog, batches: Sequence[Sequence[Record]], timestamp: int = T0_MS) -> None:
    for records in batches:
        await log.append(keyed_batch(records, timestamp=timestamp))


def key_batches(rounds: int, keys: int = 4) -> list[list[Record]]:
    """``rounds`` updates of keys k0..k<keys-1>, one record per batch, value "r<round>"."""
    return [[(f"k{k}".encode(), f"r{r}".encode())] for r in range(rounds) for k in range(keys)]


@pytest.fixture(params=["memory", "file", "postgresql", "postgresql-cold"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens stores of the parametrised engine with no background cleaner (``postgresql-cold``: a
    batch cache of a few batches, so the cleaner reads segments back from the database); closes
    them afterwards."""
    opened: list[LogStore] = []
    cache: dict[str, int] = {}
    if request.param.startswith("postgresql"):
        url = request.getfixturevalue("postgres_cluster").create_database()
        if request.param == "postgresql-cold":
            cache["postgres_cache_bytes"] = TINY_CACHE_BYTES
    else:
        url = "memory://" if request.param == "memory" else (tmp_path / "data").as_uri()

    async def factory(
        config: LogConfig = COMPACT, clock: ManualClock | None = None, **kwargs: int
    ) -> LogStore:
        kwargs.setdefault("log_cleaner_backoff_ms", 0)
        kwargs.update(cache)
        store = open_store(url, config, clock=clock, retention_check_interval_ms=0, **kwargs)
        await store.open()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        await store.close()


async def test_only_the_latest_record_per_key_survives(engine: Opener) -> None:
    """Closed segments keep one record per key, the latest, at its original offset; the event is logged."""
    store = await engine()
    log = await store.create("__consumer_offsets", 0)
    await append_all(log, key_batches(10))
    assert log.segment_count > 3
    before = await log_records(log)
    active_base = active_segment_base(log)
    with capture_logs() as logs:
        result = await log.compact(T0_MS)
    assert result is not None and result.records_after < result.records_before
    assert result.bytes_after < result.bytes_before
    after = await log_records(log)
    assert replay(after) == replay(before)
    assert set(after) <= set(before)
    closed = [r for r in after if r[0] < active_base]
    assert len({key for _, key, _ in closed}) == len(closed)
    event = next(e for e in logs if e["event"] == "log.compacted")
    assert event["topic"] == "__consumer_offsets" and event["partition"] == 0
    assert event["records_before"] == result.records_before and event["records_after"] == result.records_after
    assert {"segments", "bytes_before", "bytes_after", "duration_ms"} <= event.keys()


async def test_a_log_whose_start_moved_into_its_first_segment_is_compacted(engine: Opener) -> None:
    """After DeleteRecords moved the log start past the first segment's base, a pass still cleans it."""
    store = await engine()
    log = await store.create("__consumer_offsets", 0)
    await append_all(log, key_batches(10))
    await log.delete_records_before(2)
    before = await log_records(log)
    result = await log.compact(T0_MS)
    assert result is not None and result.records_after < result.records_before
    assert replay(await log_records(log)) == replay(before)
    assert log.log_start_offset == 2


async def test_offsets_are_kept_and_reads_cross_the_gaps(engine: Opener) -> None:
    """Reading a removed offset returns the next batch after it; every survivor reads at its offset."""
    store = await engine()
    log = await store.create("t", 0)
    await append_all(log, key_batches(8))
    end = log.log_end_offset
    await log.compact(T0_MS)
    assert (log.log_start_offset, log.log_end_offset) == (0, end)
    survivors = [offset for offset, _, _ in await log_records(log)]
    assert len(survivors) < end
    for offset in range(end):
        data = await log.read_async(offset, 1)
        header = parse_header(data)
        expected = next(s for s in survivors if s >= offset)
        assert header.base_offset <= expected <= header.last_offset
        assert header.last_offset >= offset
    assert (await log.append(keyed_batch([(b"k0", b"new")]))).base_offset == end


async def test_the_active_segment_is_never_compacted(engine: Opener) -> None:
    """Duplicates inside the active segment stay; only closed segments are rewritten."""
    store = await engine(LogConfig(cleanup_policy="compact", segment_bytes=1 << 20))
    log = await store.create("t", 0)
    await append_all(log, key_batches(5))
    before = await log.read_async(0, 1 << 20)
    assert await log.compact(T0_MS) is None
    assert await log.read_async(0, 1 << 20) == before


async def test_tombstones_stay_for_delete_retention_then_go(engine: Opener) -> None:
    """A tombstone outlives its key's values until delete_retention_ms after the pass that compacted it."""
    clock = ManualClock()
    config = LogConfig(
        cleanup_policy="compact", segment_bytes=400, index_interval_bytes=64, delete_retention_ms=DAY_MS
    )
    store = await engine(config, clock)
    log = await store.create("t", 0)
    await append_all(log, [*key_batches(3), [(b"k1", None)], *key_batches(2, keys=1)])
    await append_all(log, [[(b"pad", b"x" * 100)]] * 8)
    tombstone = next(o for o, k, v in await log_records(log) if k == b"k1" and v is None)

    await log.compact(clock.now_ms())
    compacted = await log_records(log)
    assert (tombstone, b"k1", None) in compacted
    assert [r for r in compacted if r[1] == b"k1"] == [(tombstone, b"k1", None)]
    header = parse_header(await log.read_async(tombstone, 1))
    assert header.attributes & DELETE_HORIZON_FLAG
    assert header.base_timestamp == clock.now_ms() + DAY_MS

    clock.advance(DAY_MS - 1)
    await log.compact(clock.now_ms())
    assert (tombstone, b"k1", None) in await log_records(log)
    clock.advance(1)
    assert segmented(log).compaction_due(clock.now_ms())
    await log.compact(clock.now_ms())
    assert all(key != b"k1" for _, key, _ in await log_records(log))
    assert replay(await log_records(log)) == replay(compacted)


async def test_a_compressed_batch_is_read_and_rebuilt_uncompressed(engine: Opener) -> None:
    """A gzip batch that loses records is rebuilt uncompressed from its survivors; one losing none stays."""
    store = await engine()
    log = await store.create("t", 0)
    await log.append(keyed_batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], gzipped=True))
    await log.append(keyed_batch([(b"x", b"1"), (b"y", b"1")], gzipped=True))
    await append_all(log, [[(b"a", b"2")], *([[(b"pad", b"x" * 100)]] * 8)])
    await log.compact(T0_MS)
    first = await log.read_async(0, 1 << 20)
    headers = [h for _, h in iter_batches(first, verify_crc=True)]
    assert (headers[0].base_offset, headers[0].last_offset, headers[0].compression) == (1, 2, 0)
    assert (headers[1].base_offset, headers[1].compression) == (3, 1)
    records = decode_records(first[: headers[0].size], headers[0])
    assert records is not None and [(r.offset, r.key) for r in records] == [(1, b"b"), (2, b"c")]


async def test_a_tombstone_after_an_unreadable_batch_is_kept(engine: Opener) -> None:
    """A tombstone whose key may hide in an earlier batch the cleaner cannot read is never dropped."""
    clock = ManualClock()
    store = await engine(LogConfig(cleanup_policy="compact", segment_bytes=400, delete_retention_ms=0), clock)
    log = await store.create("t", 0)
    await log.append(keyed_batch([(b"k", b"old")], transactional=True))
    await append_all(log, [[(b"k", None)], *([[(b"pad", b"x" * 100)]] * 6)])
    for _ in range(3):
        await log.compact(clock.now_ms())
        clock.advance(1)
    records = await log_records(log)
    assert records[:2] == [(0, b"k", b"old"), (1, b"k", None)]
    assert not segmented(log).compaction_due(clock.now_ms() + 10**9)
    assert replay(records).get(b"k") is None


async def test_appends_continue_while_a_pass_runs(engine: Opener) -> None:
    """Appends started during a pass get the next offsets and survive it unchanged."""
    store = await engine()
    log = await store.create("t", 0)
    await append_all(log, key_batches(10))
    end = log.log_end_offset
    late = [keyed_batch([(f"late{i}".encode(), b"v")]) for i in range(200)]
    compaction = asyncio.ensure_future(log.compact(T0_MS))
    appended = await asyncio.gather(*(log.append(b) for b in late))
    assert await compaction is not None
    assert [a.base_offset for a in appended] == list(range(end, end + 200))
    records = await log_records(log)
    assert [r for r in records if r[0] >= end] == [(end + i, f"late{i}".encode(), b"v") for i in range(200)]


async def test_the_cleaner_picks_logs_by_policy_and_dirty_ratio(engine: Opener) -> None:
    """compact_logs compacts compact-policy logs that are dirty enough and leaves delete-policy logs alone."""
    store = await engine()
    compacted = await store.create("compacted", 0)
    plain = await store.create("plain", 0, LogConfig(segment_bytes=400, retention_ms=-1))
    for log in (compacted, plain):
        await append_all(log, key_batches(3, keys=20))
    plain_before = await log_records(plain)
    assert await store.compact_logs() == 1
    assert await log_records(plain) == plain_before
    assert await store.compact_logs() == 0
    await append_all(compacted, key_batches(1, keys=6))
    assert not segmented(compacted).compaction_due(T0_MS)
    await append_all(compacted, key_batches(3, keys=20))
    assert segmented(compacted).compaction_due(T0_MS)
    assert await store.compact_logs() == 1


async def test_retention_does_not_apply_to_a_compact_only_log(engine: Opener) -> None:
    """Under cleanup.policy=compact expired segments stay; under compact,delete they go."""
    clock = ManualClock()
    store = await engine(LogConfig(cleanup_policy="compact", segment_bytes=400, retention_ms=1000), clock)
    only = await store.create("only", 0)
    both = await store.create(
        "both", 0, LogConfig(cleanup_policy="compact,delete", segment_bytes=400, retention_ms=1000)
    )
    for log in (only, both):
        await append_all(log, key_batches(5))
    clock.advance(10_000)
    await store.enforce_retention()
    assert only.log_start_offset == 0
    assert both.log_start_offset > 0


async def test_min_compaction_lag_leaves_recent_segments_alone(engine: Opener) -> None:
    """Segments holding records younger than min_compaction_lag_ms are not cleaned yet."""
    clock = ManualClock()
    config = LogConfig(cleanup_policy="compact", segment_bytes=400, min_compaction_lag_ms=60_000)
    store = await engine(config, clock)
    log = await store.create("t", 0)
    await append_all(log, key_batches(10), timestamp=clock.now_ms())
    assert await log.compact(clock.now_ms()) is None
    clock.advance(60_001)
    assert await log.compact(clock.now_ms()) is not None


async def test_truncation_into_a_compacted_gap(engine: Opener) -> None:
    """Truncating to an offset removed by compaction keeps the batches before it and ends the log there."""
    store = await engine()
    log = await store.create("t", 0)
    await append_all(
        log, [batch for i in range(20) for batch in ([(f"u{i}".encode(), b"v")], [(b"d", b"v")])]
    )
    await log.compact(T0_MS)
    survivors = [offset for offset, _, _ in await log_records(log)]
    gaps = [o for o in range(1, log.log_end_offset) if o not in survivors and o - 1 in survivors]
    gap = gaps[len(gaps) // 2]
    await log.truncate_to(gap)
    assert log.log_end_offset == gap
    assert [o for o, _, _ in await log_records(log)] == [s for s in survivors if s < gap]
    assert (await log.append(keyed_batch([(b"k", b"v")]))).base_offset == gap


async def test_the_background_cleaner_compacts_on_its_own(engine: Opener) -> None:
    """With a cleaner backoff set, a dirty compact-policy log is compacted without being asked."""
    store = await engine(log_cleaner_backoff_ms=5)
    log = await store.create("t", 0)
    with capture_logs() as logs:
        await append_all(log, key_batches(10))
        for _ in range(400):
            if any(e["event"] == "log.compacted" for e in logs):
                break
            await asyncio.sleep(0.005)
    assert any(e["event"] == "log.compacted" for e in logs)


class GatedMemoryLog(MemoryLog):
    """A memory log whose compaction pauses after staging its first segment until released."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__("t", 0, COMPACT, clock)
        self.staging = threading.Event()
        self.release = threading.Event()

    def _stage_cleaned(self, old: Segment, data: bytes, rebuilt: Segment) -> SegmentData:
        self.staging.set()
        self.release.wait(5)
        return super()._stage_cleaned(old, data, rebuilt)


async def test_appends_complete_while_the_rewrite_is_paused() -> None:
    """Appends return while the rewrite thread is still working; the swap then keeps them."""
    log = GatedMemoryLog(ManualClock())
    await append_all(log, key_batches(10))
    end = log.log_end_offset
    task = asyncio.ensure_future(log.compact(T0_MS))
    await asyncio.to_thread(log.staging.wait, 5)
    results = [await log.append(keyed_batch([(b"during", str(i).encode())])) for i in range(20)]
    assert not task.done()
    log.release.set()
    assert await task is not None
    assert [r.base_offset for r in results] == list(range(end, end + 20))
    assert [r for r in await log_records(log) if r[1] == b"during"] == [
        (end + i, b"during", str(i).encode()) for i in range(20)
    ]


async def test_a_pass_overtaken_by_truncation_is_dropped() -> None:
    """When truncation replaces segments while a pass runs, the pass is discarded and the log is intact."""
    log = GatedMemoryLog(ManualClock())
    await append_all(log, key_batches(10))
    task = asyncio.ensure_future(log.compact(T0_MS))
    await asyncio.to_thread(log.staging.wait, 5)
    await log.truncate_to(20)
    expected = await log_records(log)
    log.release.set()
    assert await task is None
    assert await log_records(log) == expected and len(expected) == 20


batches_strategy = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from([b"a", b"b", b"c", b"d", b"e"]), st.one_of(st.none(), st.binary(max_size=30))
        ),
        min_size=1,
        max_size=4,
    ),
    min_size=1,
    max_size=40,
)


ENGINES = ["memory", "file", "postgresql", "postgresql-cold"]
_examples = itertools.count()


@pytest.mark.parametrize("engine_name", ENGINES)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(batches=batches_strategy)
def test_compaction_preserves_the_replayed_state(
    batches: list[list[Record]], engine_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """On every engine (the cold PostgreSQL one reading segments back from the database), replaying a
    log gives the same key -> value map before compaction, after it and after tombstones go."""
    topic = f"t{next(_examples)}"  # examples share the engine's database or directory

    async def scenario(url: str) -> None:
        clock = ManualClock()
        config = LogConfig(
            cleanup_policy="compact",
            segment_bytes=200,
            index_interval_bytes=50,
            delete_retention_ms=10,
            flush_policy="interval",
        )
        cache = {"postgres_cache_bytes": TINY_CACHE_BYTES} if engine_name == "postgresql-cold" else {}
        store = open_store(
            url, config, clock=clock, retention_check_interval_ms=0, log_cleaner_backoff_ms=0, **cache
        )
        await store.open()
        try:
            log = await store.create(topic, 0)
            await append_all(log, batches)
            before = await log_records(log)
            await log.compact(clock.now_ms())
            first = await log_records(log)
            clock.advance(10)
            await log.compact(clock.now_ms())
            second = await log_records(log)
            assert replay(first) == replay(before) == replay(second)
            assert set(second) <= set(first) <= set(before)
            assert log.log_end_offset == len(before)
        finally:
            await store.close()

    asyncio.run(scenario(_engine_url(engine_name, request, tmp_path)))


_urls: dict[tuple[str, str], str] = {}


def _engine_url(engine_name: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One database (or directory) per engine and test item, made at its first example."""
    if engine_name == "memory":
        return "memory://"
    if engine_name == "file":
        return (tmp_path / "data").as_uri()
    key = (request.node.nodeid, engine_name)
    if key not in _urls:
        _urls[key] = request.getfixturevalue("postgres_cluster").create_database()
    return _urls[key]


async def test_aborted_transactions_go_and_markers_stay(engine: Opener) -> None:
    """Compaction drops an aborted transaction's batches, keeps committed and open ones and every marker."""
    store = await engine()
    log = await store.create("t", 0)
    aborted = encode_transactional_batch([(b"a", b"aborted-1"), (b"b", b"aborted-2")], 1, 0, T0_MS)
    committed = encode_transactional_batch([(b"c", b"committed")], 2, 0, T0_MS)
    await log.append(aborted.data)  # 0-1
    await log.append(committed.data)  # 2
    await log.append(encode_marker_batch(1, 0, False, 0, T0_MS).data)  # 3
    await log.append(encode_marker_batch(2, 0, True, 0, T0_MS).data)  # 4
    await log.append(encode_transactional_batch([(b"d", b"open")], 3, 0, T0_MS).data)  # 5
    await append_all(log, [[(b"pad", b"x" * 100)]] * 8)
    assert active_segment_base(log) > 5
    await log.compact(T0_MS)
    kept = {offset: value for offset, _, value in await log_records(log)}
    assert 0 not in kept and 1 not in kept, "the aborted records are gone"
    assert kept[2] == b"committed" and kept[5] == b"open"
    markers = []
    offset = 0
    while offset < log.log_end_offset:
        data = await log.read_async(offset, 1 << 20)
        for _, header in iter_batches(data):
            if header.is_control:
                markers.append(header.base_offset)
            offset = header.next_offset
    assert markers == [3, 4]


async def test_compaction_stops_at_the_first_unstable_offset(engine: Opener) -> None:
    """No segment reaching the oldest open transaction is cleaned; once it ends, they are."""
    store = await engine()
    unstable: dict[tuple[str, int], int] = {("t", 0): 0}
    store.first_unstable = lambda topic, partition: unstable.get((topic, partition))
    log = await store.create("t", 0)
    await append_all(log, key_batches(10))
    assert log.segment_count > 3
    assert await log.compact(T0_MS) is None
    unstable[("t", 0)] = segmented(log)._segments[2].base_offset
    result = await log.compact(T0_MS)
    assert result is not None and result.segments == 2
    del unstable[("t", 0)]
    result = await log.compact(T0_MS)
    assert result is not None and result.segments > 2


async def test_committed_transactional_records_are_compacted(engine: Opener) -> None:
    """A committed transaction's records are superseded by later values like any others; an open
    transaction's records (no marker yet) are kept whatever follows."""
    store = await engine()
    log = await store.create("t", 0)
    committed = encode_transactional_batch([(b"a", b"txn-a"), (b"b", b"txn-b")], 1, 0, T0_MS)
    await log.append(committed.data)  # 0-1
    await log.append(encode_marker_batch(1, 0, True, 0, T0_MS).data)  # 2
    await log.append(encode_transactional_batch([(b"c", b"open-c")], 2, 0, T0_MS).data)  # 3
    await append_all(log, [[(b"a", b"plain-a")], [(b"c", b"plain-c")]])  # 4, 5
    await append_all(log, [[(b"pad", b"x" * 100)]] * 8)
    assert active_segment_base(log) > 5
    await log.compact(T0_MS)
    kept = {offset: value for offset, _, value in await log_records(log)}
    assert 0 not in kept, "txn-a is superseded by plain-a"
    assert kept[1] == b"txn-b" and kept[3] == b"open-c"
    assert kept[4] == b"plain-a" and kept[5] == b"plain-c"
    rebuilt = parse_header(await log.read_async(1, 1))
    assert rebuilt.base_offset == 1 and rebuilt.is_transactional and rebuilt.producer_id == 1
