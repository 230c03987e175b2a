"""The ``postgresql://`` engine's memory: a batch index per partition, bytes in a bounded cache, cold
reads from the database, and a cluster node that opens only the partitions it claims."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import iter_batches
from kcoord.storage import LogConfig, PartitionLog
from kcoord.storage.postgres import PostgresLogStore
from tests.support.postgres import PostgresCluster

from .helpers import T0_MS, BatchBuilder

SMALL = LogConfig(segment_bytes=600, index_interval_bytes=100)


@pytest.fixture
async def database(postgres_cluster: PostgresCluster) -> AsyncIterator[str]:
    yield postgres_cluster.create_database()


async def opened(url: str, *, cache_bytes: int = 1 << 20, owned_only: bool = False) -> PostgresLogStore:
    store = PostgresLogStore(
        url, SMALL, retention_check_interval_ms=0, log_cleaner_backoff_ms=0,
        cache_bytes=cache_bytes, owned_only=owned_only,
    )  # fmt: skip
    await store.open()
    return store


async def fill(log: PartitionLog, make_batch: BatchBuilder, count: int) -> int:
    """Append ``count`` two-record batches; return the size of one."""
    size = 0
    for i in range(count):
        batch = make_batch([bytes([i % 256]) * 30, b"x"], timestamps=[T0_MS + i] * 2)
        size = len(batch)
        await log.append(batch)
    return size


def bases(data: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batches(data, verify_crc=True)]


async def test_cold_batches_are_read_from_the_database(database: str, make_batch: BatchBuilder) -> None:
    """With no cache at all every read goes to the database and returns the bytes a warm store returns."""
    warm = await opened(database)
    try:
        log = await warm.create("t", 0)
        await fill(log, make_batch, 40)
        expected = [await log.read_async(offset, 250) for offset in range(0, 80, 7)]
    finally:
        await warm.close()
    cold = await opened(database, cache_bytes=0)
    try:
        log = cold.get("t", 0)
        assert log is not None and log.segment_count > 1
        assert [await log.read_async(offset, 250) for offset in range(0, 80, 7)] == expected
        assert len(cold.cache) == 0 and cold.cache.misses > 0
        with pytest.raises(KafkaError) as caught:
            log.read(0, 250)
        assert caught.value.code == ErrorCode.kafka_storage_error
    finally:
        await cold.close()


async def test_the_tail_just_appended_is_read_from_memory(database: str, make_batch: BatchBuilder) -> None:
    """Consumers at the head hit the cache: the last batches appended are there, even after a cold read."""
    store = await opened(database)
    try:
        log = await store.create("t", 0)
        size = await fill(log, make_batch, 1)
        store.cache.capacity = 4 * size
        await fill(log, make_batch, 29)
        assert store.cache.size <= store.cache.capacity
        assert bases(await log.read_async(0, 1)) == [0]  # cold: from the database
        misses = store.cache.misses
        tail = log.log_end_offset - 2
        assert bases(log.read(tail, 1 << 20)) == [tail]
        assert bases(await log.read_async(tail - 4, 1 << 20)) == [tail - 4, tail - 2, tail]
        assert store.cache.misses == misses
    finally:
        await store.close()


async def test_a_reopened_partition_holds_its_index_not_its_bytes(
    database: str, make_batch: BatchBuilder
) -> None:
    """Opening reads the batch rows without their data: the cache is empty until something is read."""
    store = await opened(database)
    log = await store.create("t", 0)
    await fill(log, make_batch, 20)
    expected = await log.read_async(0, 1 << 20)
    await store.close()
    again = await opened(database)
    try:
        log = again.get("t", 0)
        assert log is not None and log.log_end_offset == 40
        assert len(again.cache) == 0
        assert log.offset_for_timestamp(T0_MS + 12) == (24, T0_MS + 12)
        assert log.max_timestamp() == (38, T0_MS + 19)
        assert len(again.cache) == 0
        assert await log.read_async(0, 1 << 20) == expected
    finally:
        await again.close()


async def test_an_owned_only_store_opens_a_partition_when_it_is_claimed(
    database: str, make_batch: BatchBuilder
) -> None:
    """A cluster node opens no partition at start; creating one the database holds only remembers its
    config, and reopening it under a claim loads its index with that config."""
    writer = await opened(database)
    for partition in range(3):
        await fill(await writer.create("t", partition), make_batch, 5)
    await writer.close()

    node = await opened(database, owned_only=True)
    try:
        assert node.partitions() == []
        compacted = LogConfig(cleanup_policy="compact", segment_bytes=600, index_interval_bytes=100)
        handle = await node.create("t", 1, compacted)
        assert node.get("t", 1) is None and node.partitions() == []
        with pytest.raises(KafkaError):
            await handle.read_async(0, 100)
        claimed = await node.reopen("t", 1, owner_epoch=1)
        assert node.partitions() == [("t", 1)] and node.get("t", 1) is claimed
        assert claimed.config == compacted and claimed.log_end_offset == 10
        assert bases(await claimed.read_async(0, 1 << 20))[0] == 0
        await node.forget("t", 1)
        assert node.partitions() == [] and len(node.cache) == 0
        assert (await node.reopen("t", 1, owner_epoch=2)).config == compacted
        new = await node.create("u", 0)
        assert node.get("u", 0) is new and new.log_end_offset == 0
    finally:
        await node.close()
