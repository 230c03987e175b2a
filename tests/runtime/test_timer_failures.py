"""A timer callback that raises: the classic group's parked JoinGroups are answered with a retriable
error, the failure is logged, and the partition reloads from its log and serves the group again."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from structlog.testing import capture_logs

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.messages import JoinGroupRequest
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.protocol.errors import KafkaError
from kcoord.runtime.group_coordinator import GroupCoordinator
from kcoord.runtime.group_service import GroupService
from kcoord.runtime.pattern_worker import PatternWorker
from kcoord.runtime.runner import PartitionState
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.api import Timer
from kcoord.timer.clock import SystemClock
from tests.runtime.test_service import PARTITIONS, FakeOffsetsTopic

INITIAL_DELAY_MS = 200
GROUP = "timer-failure-group"


def _shard(partition: int, timer: Timer) -> GroupCoordinatorShard:
    return GroupCoordinatorShard(
        timer,
        classic_config=ClassicGroupConfig(initial_rebalance_delay_ms=INITIAL_DELAY_MS),
        offset_metadata_max_bytes=4096,
        offsets_retention_ms=7 * 24 * 3600 * 1000,
        topic_exists=lambda topic, partition: True,
    )


@pytest.fixture
async def coordinator() -> AsyncIterator[GroupCoordinator]:
    store = MemoryLogStore()
    await store.open()
    coordinator = GroupCoordinator(
        FakeOffsetsTopic(store), SystemClock(), _shard, num_partitions=PARTITIONS, expiry_interval_ms=600_000
    )
    await coordinator.start()
    await asyncio.wait_for(coordinator.loaded.wait(), 5)
    try:
        yield coordinator
    finally:
        await coordinator.stop()
        await store.close()


def join_request(client: str) -> JoinGroupRequest:
    """JoinGroup v3 (no member-id round): a new member is parked until the initial delay passes."""
    subscription = struct.pack(">hih", 0, 1, 6) + b"orders" + struct.pack(">i", -1)
    return JoinGroupRequest(
        group_id=GROUP,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(("range", subscription),),
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        client_id=client,
        api_version=3,
    )


async def answer_code(join: asyncio.Future[Any]) -> ErrorCode:
    """The JoinGroup's error: from its response, or from the KafkaError it was failed with."""
    try:
        response = await asyncio.wait_for(join, 5)
    except KafkaError as exc:
        return exc.code
    return ErrorCode(response.error_code)


async def fail_the_join_deadline(
    coordinator: GroupCoordinator, *, unload_fails: bool
) -> list[dict[str, Any]]:
    """Two members join (parked for the initial delay) and the join deadline's callback raises (and,
    if ``unload_fails``, so does unloading the broken shard); both joins must be answered
    NOT_COORDINATOR and the partition must reload. The captured log lines."""
    groups = GroupService(coordinator, patterns=PatternWorker())
    runner = coordinator.runner(GROUP)
    broken_shard: Any = runner.shard

    def injected(*_: object) -> None:
        raise RuntimeError("injected failure")

    broken_shard.classic._rebalancer.on_join_deadline = injected
    if unload_fails:
        broken_shard.classic.unload = injected
    with capture_logs() as logs:
        parked = [asyncio.ensure_future(groups.join_group(join_request(f"c{n}"), n)) for n in (1, 2)]
        await asyncio.sleep(0.05)
        assert not any(join.done() for join in parked), "the joins wait for the initial delay"
        assert [await answer_code(join) for join in parked] == [ErrorCode.not_coordinator] * 2
        for _ in range(500):
            if runner.state is PartitionState.ACTIVE:
                break
            await asyncio.sleep(0.01)
    assert runner.state is PartitionState.ACTIVE and runner.shard is not broken_shard
    rejoined = await asyncio.wait_for(groups.join_group(join_request("again"), 3), 5)
    assert rejoined.error_code == ErrorCode.none and rejoined.member_id, "the reloaded shard serves the group"
    return logs


async def test_a_failing_join_deadline_answers_the_parked_joins_and_reloads(
    coordinator: GroupCoordinator,
) -> None:
    """The join deadline's callback raises: both parked JoinGroups get NOT_COORDINATOR (clients find the
    coordinator again and rejoin), coordinator.timer_failed is logged with the key, and after the
    reload a new JoinGroup completes on a fresh shard."""
    logs = await fail_the_join_deadline(coordinator, unload_fails=False)
    (failure,) = [entry for entry in logs if entry["event"] == "coordinator.timer_failed"]
    assert failure["log_level"] == "error" and "injected failure" in failure["error"]
    assert failure["key"] == f"classic:join:{len(GROUP)}:{GROUP}"


async def test_parked_joins_are_answered_even_when_the_broken_shard_cannot_unload(
    coordinator: GroupCoordinator,
) -> None:
    """If unloading the broken shard fails too, the runner still answers every request waiting on the
    partition NOT_COORDINATOR, and logs both failures."""
    logs = await fail_the_join_deadline(coordinator, unload_fails=True)
    events = [entry["event"] for entry in logs if entry["log_level"] == "error"]
    assert events == ["coordinator.timer_failed", "offsets_partition.unload_failed"]
