"""What only the ``postgresql://`` engine does: state rebuilt from the database, versioned schema,
group commit in one transaction, and riding out a database outage with retriable errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import iter_batches
from kcoord.storage import LogConfig, LogStore, open_store
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.schema import MIGRATIONS
from tests.support.postgres import PostgresCluster

from .helpers import T0_MS, BatchBuilder, ManualClock

SMALL = LogConfig(segment_bytes=400, index_interval_bytes=100)


@pytest.fixture
async def database(postgres_cluster: PostgresCluster) -> AsyncIterator[str]:
    yield postgres_cluster.create_database()


async def opened(url: str, config: LogConfig = SMALL, clock: ManualClock | None = None) -> LogStore:
    store = open_store(url, config, clock=clock, retention_check_interval_ms=0, log_cleaner_backoff_ms=0)
    await store.open()
    return store


def batches_of(data: bytes) -> list[tuple[int, int, bytes]]:
    return [
        (h.base_offset, h.last_offset, data[at : at + h.size])
        for at, h in iter_batches(data, verify_crc=True)
    ]


async def test_a_reopened_store_reads_what_was_appended(database: str, make_batch: BatchBuilder) -> None:
    """Logs, segments, offsets and bytes come back from the database after the store is closed."""
    store = await opened(database)
    log = await store.create("t", 0)
    other = await store.create("t", 1)
    for i in range(30):
        await log.append(make_batch([bytes([i]) * 20, b"x"], timestamps=[T0_MS + i] * 2))
    await other.append(make_batch([b"one"]))
    before = await log.read_async(0, 1 << 20)
    segments = log.segment_count
    await store.close()

    again = await opened(database)
    try:
        assert again.partitions() == [("t", 0), ("t", 1)]
        log = again.get("t", 0)
        assert log is not None
        assert await log.read_async(0, 1 << 20) == before
        assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (0, 60, segments)
        assert log.offset_for_timestamp(T0_MS + 10) == (20, T0_MS + 10)
        appended = await log.append(make_batch([b"next"]))
        assert appended.base_offset == 60
    finally:
        await again.close()


async def test_retention_truncation_and_compaction_survive_a_reopen(
    database: str, make_batch: BatchBuilder
) -> None:
    """What structural changes leave (start offset, end offset, compacted records) is what reloads."""
    clock = ManualClock()
    store = await opened(database, LogConfig(segment_bytes=400, retention_bytes=800), clock)
    log = await store.create("t", 0)
    for i in range(40):
        await log.append(make_batch([bytes([i]) * 30]))
    assert await store.enforce_retention() > 0
    await log.truncate_to(35)
    start, end = log.log_start_offset, log.log_end_offset
    data = await log.read_async(start, 1 << 20)
    assert start > 0 and end == 35
    await store.close()

    again = await opened(database, LogConfig(segment_bytes=400, retention_bytes=800), clock)
    try:
        log = again.get("t", 0)
        assert log is not None
        assert (log.log_start_offset, log.log_end_offset) == (start, end)
        assert await log.read_async(start, 1 << 20) == data
    finally:
        await again.close()


async def test_schema_versions_are_recorded_once(database: str, postgres_cluster: PostgresCluster) -> None:
    """Every migration is recorded in schema_migrations; opening again applies nothing twice."""
    for _ in range(2):
        store = await opened(database)
        await store.close()
    rows = postgres_cluster.sql(database, "SELECT version FROM schema_migrations ORDER BY version")
    assert rows.split() == [str(version) for version, _, _ in MIGRATIONS]


async def test_concurrent_appends_share_transactions(database: str, make_batch: BatchBuilder) -> None:
    """Appends in flight together across partitions commit in fewer rounds than appends, in order."""
    store = await opened(database, LogConfig())
    assert isinstance(store, PostgresLogStore)
    try:
        logs = [await store.create("t", p) for p in range(4)]
        rounds = store.committer.rounds
        results = await asyncio.gather(
            *(log.append(make_batch([f"{p}-{i}".encode()])) for i in range(25) for p, log in enumerate(logs))
        )
        assert store.committer.rounds - rounds < 100
        for p, log in enumerate(logs):
            assert [r.base_offset for r in results[p::4]] == list(range(25))
            assert [b for b, _, _ in batches_of(await log.read_async(0, 1 << 20))] == list(range(25))
    finally:
        await store.close()


async def test_an_outage_gives_retriable_errors_and_recovers(
    postgres_cluster: PostgresCluster, database: str, make_batch: BatchBuilder
) -> None:
    """With the database down appends fail with KAFKA_STORAGE_ERROR; once it is back they succeed
    again without reopening the store, and every acknowledged batch is there after a reload."""
    store = await opened(database)
    acknowledged: list[int] = []
    try:
        log = await store.create("t", 0)
        acknowledged.append((await log.append(make_batch([b"before"]))).base_offset)
        postgres_cluster.stop_server()
        try:
            with pytest.raises(KafkaError) as failed:
                await asyncio.wait_for(log.append(make_batch([b"lost"])), 30)
            assert failed.value.code == ErrorCode.kafka_storage_error
        finally:
            postgres_cluster.start_server()
        for _ in range(20):
            try:
                acknowledged.append(
                    (await asyncio.wait_for(log.append(make_batch([b"after"])), 30)).base_offset
                )
                break
            except KafkaError as exc:
                assert exc.code == ErrorCode.kafka_storage_error
                await asyncio.sleep(0.25)
        assert len(acknowledged) == 2
    finally:
        await store.close()

    again = await opened(database)
    try:
        log = again.get("t", 0)
        assert log is not None
        stored = batches_of(await log.read_async(0, 1 << 20))
        assert [base for base, _, _ in stored] == acknowledged
        assert acknowledged[1] == log.log_end_offset - 1
    finally:
        await again.close()


async def test_opening_waits_for_a_database_that_is_starting(
    postgres_cluster: PostgresCluster, database: str, make_batch: BatchBuilder
) -> None:
    """A node started before its database connects once the database accepts connections."""
    postgres_cluster.stop_server()
    try:
        opening = asyncio.ensure_future(opened(database))
        await asyncio.sleep(1.0)
        assert not opening.done()
    finally:
        await asyncio.to_thread(postgres_cluster.start_server)
    store = await asyncio.wait_for(opening, 30)
    try:
        log = await store.create("t", 0)
        assert (await log.append(make_batch([b"up"]))).base_offset == 0
    finally:
        await store.close()


async def test_a_log_start_moved_by_delete_records_survives_a_reopen(
    database: str, make_batch: BatchBuilder
) -> None:
    """DeleteRecords' new log start, inside a segment, is what a reopened store starts the log at."""
    store = await opened(database)
    log = await store.create("t", 0)
    for i in range(10):
        await log.append(make_batch([bytes([i]) * 10]))
    await log.delete_records_before(7)
    assert log.log_start_offset == 7
    await store.close()

    again = await opened(database)
    try:
        log = again.get("t", 0)
        assert log is not None
        assert (log.log_start_offset, log.log_end_offset) == (7, 10)
    finally:
        await again.close()
