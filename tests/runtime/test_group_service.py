"""The group service: each group API's typed call runs on the group's partition with real shards.

Real classic/offsets shards on memory-backed ``__consumer_offsets`` partitions, driven through
the service exactly as the API modules call it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kio.schema.errors import ErrorCode

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.offsets import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitTopic,
    OffsetFetchTopic,
)
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.runtime.group_coordinator import GroupCoordinator
from kcoord.runtime.group_service import GroupService
from kcoord.runtime.pattern_worker import PatternWorker
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.api import Timer
from kcoord.timer.clock import SystemClock
from tests.runtime.test_service import PARTITIONS, FakeOffsetsTopic


def _shard(partition: int, timer: Timer) -> GroupCoordinatorShard:
    return GroupCoordinatorShard(
        timer,
        classic_config=ClassicGroupConfig(initial_rebalance_delay_ms=0),
        offset_metadata_max_bytes=4096,
        offsets_retention_ms=7 * 24 * 3600 * 1000,
        topic_exists=lambda topic, partition: True,
    )


def _coordinator(store: MemoryLogStore) -> GroupCoordinator:
    return GroupCoordinator(
        FakeOffsetsTopic(store), SystemClock(), _shard, num_partitions=PARTITIONS, expiry_interval_ms=600_000
    )


@pytest.fixture
async def groups() -> AsyncIterator[GroupService]:
    store = MemoryLogStore()
    await store.open()
    coordinator = _coordinator(store)
    await coordinator.start()
    await asyncio.wait_for(coordinator.loaded.wait(), 5)
    try:
        yield GroupService(coordinator, patterns=PatternWorker())
    finally:
        await coordinator.stop()
        await store.close()


def _commit(group_id: str, offset: int) -> OffsetCommitRequest:
    partition = OffsetCommitPartition(partition_index=0, committed_offset=offset, committed_leader_epoch=-1)
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[OffsetCommitTopic("orders", [partition])],
        api_version=8,
    )


async def test_commit_then_fetch_reads_the_committed_offset(groups: GroupService) -> None:
    """A simple group's commit is answered once durable and the next fetch reads it."""
    committed = await groups.commit_offsets(_commit("simple", 42))
    assert [p.error_code for t in committed.topics for p in t.partitions] == [ErrorCode.none]
    fetched = groups.fetch_offsets("simple", [OffsetFetchTopic("orders", [0])], require_stable=False)
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [42]


async def test_list_describe_and_delete_a_group(groups: GroupService) -> None:
    """The admin calls see the group the commit made, and deleting it removes its offsets."""
    await groups.commit_offsets(_commit("simple", 7))
    listing = groups.list_groups(None)
    assert listing.complete and [g.group_id for g in listing.groups] == ["simple"]
    assert groups.describe_group("simple", 5).state == "Empty"
    deleted = await groups.delete_groups(["simple", "ghost"])
    assert {(d.group_id, d.error_code) for d in deleted} == {
        ("simple", ErrorCode.none),
        ("ghost", ErrorCode.group_id_not_found),
    }
    fetched = groups.fetch_offsets("simple", [OffsetFetchTopic("orders", [0])], require_stable=False)
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [-1]


async def test_listing_is_incomplete_until_every_partition_is_loaded() -> None:
    """Before the partitions load, ListGroups' answer says it is incomplete (COORDINATOR_LOAD_IN_PROGRESS)."""
    listing = GroupService(_coordinator(MemoryLogStore()), patterns=PatternWorker()).list_groups(None)
    assert (listing.groups, listing.complete) == ([], False)
