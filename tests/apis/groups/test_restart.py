"""Committed offsets and a formed group survive a restart: the new App replays the offsets log."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import connected, running_app
from tests.protocol.request_samples import (
    Scene,
    commit_sample,
    create_topic,
    join_and_sync,
    offset_fetch_sample,
)


async def test_offsets_and_group_generation_come_back_after_a_restart(tmp_path: Path) -> None:
    """Restarted on the same directory, offsets read back the same and the member's generation is current."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        scene = Scene(client, 0, port, app.node.node_id, topic="orders", group="survivors")
        await create_topic(scene)
        await join_and_sync(scene)
        await join_and_sync(Scene(client, 0, port, app.node.node_id, topic="orders", group="survivors-too"))
        committed = await client.call(ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset=1234))
        assert committed.topics[0].partitions[0].error_code == ErrorCode.none
        member_id, generation = scene.member_id, scene.generation
        before = app.coordinator.read(scene.group, lambda shard: shard.classic.generation_id(scene.group))
    assert before == generation

    async with running_app(tmp_path) as (app, port), connected(port) as client:
        restored = app.coordinator.read(scene.group, lambda shard: shard.classic.generation_id(scene.group))
        assert restored == generation
        after = Scene(client, 0, port, app.node.node_id, topic="orders", group="survivors")
        fetched = await client.call(ApiKey.OFFSET_FETCH, 8, offset_fetch_sample(after))
        partition = fetched.groups[0].topics[0].partitions[0]
        assert (partition.committed_offset, partition.metadata) == (1234, "round trip")
        beat = await client.call(
            ApiKey.HEARTBEAT,
            4,
            {"group_id": scene.group, "generation_id": generation, "member_id": member_id},
        )
        assert beat.error_code == ErrorCode.none
        described = await client.call(
            ApiKey.DESCRIBE_GROUPS,
            5,
            {"groups": [scene.group, "survivors-too"], "include_authorized_operations": False},
        )
        survivors, other = described.groups
        assert (survivors.group_state, [m.member_id for m in survivors.members]) == ("Stable", [member_id])
        assert other.group_state == "Stable"
