"""The offsets log end to end: commits compact down to the latest per key and survive a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from tests.protocol.in_process import connected, running_app

from kcoord.app import App
from kcoord.coordinator.partitioner import partition_for
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_coordinator import OFFSETS_TOPIC
from kcoord.storage import PartitionLog

GROUP = "compacted-group"
TOPIC = "compacted-topic"
COMMITS = 300
SETTINGS = {"offsets.topic.segment.bytes": "2048", "log.cleaner.backoff.ms": "0"}


def _commit(offset: int) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": offset + p,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p in range(2)
                ],
            }
        ],
    }


def _fetch() -> dict[str, Any]:
    return {"groups": [{"group_id": GROUP, "topics": None}], "require_stable": False}


async def _committed(port: int) -> dict[int, int]:
    async with connected(port) as client:
        response = await client.call(ApiKey.OFFSET_FETCH, 8, _fetch())
    (group,) = response.groups
    assert group.error_code == ErrorCode.none
    return {int(p.partition_index): int(p.committed_offset) for t in group.topics for p in t.partitions}


async def _create_topic_and_commit(port: int) -> None:
    """TOPIC with two partitions, then COMMITS commits of the group to both."""
    async with connected(port) as client:
        topic = {
            "name": TOPIC,
            "num_partitions": 2,
            "replication_factor": 1,
            "assignments": [],
            "configs": [],
        }
        created = await client.call(ApiKey.CREATE_TOPICS, 4, {"topics": [topic], "timeout": 10_000})
        assert created.topics[0].error_code == ErrorCode.none
        for offset in range(1, COMMITS + 1):
            response = await client.call(ApiKey.OFFSET_COMMIT, 8, _commit(offset))
            assert {p.error_code for t in response.topics for p in t.partitions} == {ErrorCode.none}


def _offsets_log(app: App) -> PartitionLog:
    """The partition of __consumer_offsets that holds GROUP."""
    log = app.store.get(OFFSETS_TOPIC, partition_for(GROUP, app.coordinator.num_partitions))
    assert log is not None
    return log


async def test_commits_compact_to_the_latest_per_key_and_replay_after_restart(tmp_path: Path) -> None:
    """Hundreds of commits to two partitions shrink to the latest records, which a restart replays."""
    async with running_app(tmp_path, **SETTINGS) as (app, port):
        await _create_topic_and_commit(port)
        offsets_log = _offsets_log(app)
        assert offsets_log.config.cleanup_policy == "compact"
        size_before = offsets_log.size_bytes
        result = await offsets_log.compact(app.clock.now_ms())
        assert result is not None
        assert result.records_after < result.records_before / 10
        assert offsets_log.size_bytes < size_before / 4
        assert await _committed(port) == {0: COMMITS, 1: COMMITS + 1}

    async with running_app(tmp_path, **SETTINGS) as (_, port):
        assert await _committed(port) == {0: COMMITS, 1: COMMITS + 1}


async def test_the_background_cleaner_compacts_the_offsets_log(tmp_path: Path) -> None:
    """With the cleaner running, the offsets log shrinks on its own once enough of it is dirty."""
    async with running_app(tmp_path, **{**SETTINGS, "log.cleaner.backoff.ms": "50"}) as (app, port):
        await _create_topic_and_commit(port)
        offsets_log = _offsets_log(app)
        # The cleaner may already have run during the commits, so the bound is not a fraction of
        # the size now: uncompacted, 600 commit records fill many segments; compacted, what is left
        # is the active segment (never cleaned) and two records.
        compacted_bound = 2 * int(SETTINGS["offsets.topic.segment.bytes"])
        deadline = asyncio.get_running_loop().time() + 10
        while offsets_log.size_bytes > compacted_bound:
            assert asyncio.get_running_loop().time() < deadline, "the cleaner never compacted the log"
            await asyncio.sleep(0.05)
        assert await _committed(port) == {0: COMMITS, 1: COMMITS + 1}
