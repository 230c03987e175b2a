"""What the group API edge modules answer in each version's own shape, over a real socket.

Each test runs a real :class:`App` on the ``memory://`` store in the test's loop. A partition
"still loading" is simulated by putting its runner back in the LOADING state, which is exactly
what the edge sees while a partition replays after a restart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kcoord.app import App
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.runner import PartitionState
from tests.protocol.in_process import AsyncRawClient, connected, running_app
from tests.protocol.request_samples import (
    Scene,
    commit_offset,
    join_and_sync,
    join_sample,
    offset_fetch_sample,
)


@dataclass
class Server:
    app: App
    client: AsyncRawClient
    port: int

    def scene(self, group: str, topic: str = "orders") -> Scene:
        return Scene(self.client, 0, self.port, self.app.node.node_id, topic=topic, group=group)

    @contextmanager
    def loading(self, group: str) -> Iterator[None]:
        """The group's offsets partition answers as if it were still loading."""
        runner = self.app.coordinator.runner(group)
        runner.state = PartitionState.LOADING
        try:
            yield
        finally:
            runner.state = PartitionState.ACTIVE

    async def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        return await self.client.call(api_key, version, body)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with running_app(tmp_path, store_url="memory://") as (app, port), connected(port) as client:
        yield Server(app, client, port)


async def stable_group(server: Server, group: str, topic: str = "orders") -> Scene:
    scene = server.scene(group, topic)
    await join_and_sync(scene)
    return scene


async def empty_group(server: Server, group: str, topic: str = "orders") -> Scene:
    scene = server.scene(group, topic)
    await commit_offset(scene)
    return scene


# -- LeaveGroup


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_leave_group_v0_to_v2_answers_one_member_at_top_level(server: Server, version: int) -> None:
    """LeaveGroup v0-2 carry one member; its result is the top-level error (stranger: UNKNOWN_MEMBER_ID)."""
    scene = await stable_group(server, f"leave-{version}")
    stranger = await server.call(
        ApiKey.LEAVE_GROUP, version, {"group_id": scene.group, "member_id": "nobody"}
    )
    assert stranger.error_code == ErrorCode.unknown_member_id
    left = await server.call(
        ApiKey.LEAVE_GROUP, version, {"group_id": scene.group, "member_id": scene.member_id}
    )
    assert left.error_code == ErrorCode.none


@pytest.mark.parametrize("version", [3, 4, 5])
async def test_leave_group_v3_and_later_answers_each_member(server: Server, version: int) -> None:
    """LeaveGroup v3+ leave in a batch: top-level NONE, one error per member (stranger: UNKNOWN_MEMBER_ID)."""
    scene = await stable_group(server, f"leave-{version}")
    members = [{"member_id": scene.member_id, "reason": "done"}, {"member_id": "nobody", "reason": "?"}]
    response = await server.call(ApiKey.LEAVE_GROUP, version, {"group_id": scene.group, "members": members})
    assert response.error_code == ErrorCode.none
    assert [(m.member_id, m.error_code) for m in response.members] == [
        (scene.member_id, ErrorCode.none),
        ("nobody", ErrorCode.unknown_member_id),
    ]


# -- OffsetFetch


async def test_offset_fetch_v1_puts_a_group_error_in_every_partition(server: Server) -> None:
    """v1 has no group-level error: a loading partition's error is copied into each asked partition."""
    scene = await empty_group(server, "fetch-v1")
    with server.loading(scene.group):
        response = await server.call(ApiKey.OFFSET_FETCH, 1, offset_fetch_sample(scene))
    (partition,) = response.topics[0].partitions
    assert (partition.partition_index, partition.committed_offset) == (0, -1)
    assert partition.error_code == ErrorCode.coordinator_load_in_progress


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7])
async def test_offset_fetch_v2_to_v7_puts_a_group_error_at_top_level(server: Server, version: int) -> None:
    """v2-7 answer a group error at top level with no topics, and committed offsets once loaded."""
    scene = await empty_group(server, f"fetch-v{version}")
    with server.loading(scene.group):
        response = await server.call(ApiKey.OFFSET_FETCH, version, offset_fetch_sample(scene))
    assert (response.error_code, response.topics) == (ErrorCode.coordinator_load_in_progress, ())
    loaded = await server.call(ApiKey.OFFSET_FETCH, version, offset_fetch_sample(scene))
    assert loaded.error_code == ErrorCode.none
    assert loaded.topics[0].partitions[0].committed_offset == 42


async def test_offset_fetch_v8_answers_an_error_per_group(server: Server) -> None:
    """v8 asks for several groups; a loading group's error goes in its own entry, the other is answered."""
    loading = await empty_group(server, "fetch-v8-a")
    partition_for = server.app.coordinator.partition_for
    neighbour = next(
        f"fetch-v8-{i}" for i in range(100) if partition_for(f"fetch-v8-{i}") != partition_for(loading.group)
    )
    ready = await empty_group(server, neighbour, topic="payments")
    body = {
        "groups": [
            {"group_id": g.group, "topics": [{"name": g.topic, "partition_indexes": [0]}]}
            for g in (loading, ready, server.scene(""))
        ]
    }
    with server.loading(loading.group):
        response = await server.call(ApiKey.OFFSET_FETCH, 8, body)
    first, second, unnamed = response.groups
    assert (first.group_id, first.error_code, first.topics) == (
        loading.group,
        ErrorCode.coordinator_load_in_progress,
        (),
    )
    assert (second.error_code, second.topics[0].partitions[0].committed_offset) == (ErrorCode.none, 42)
    assert unnamed.error_code == ErrorCode.invalid_group_id


async def test_offset_fetch_of_an_unknown_group_answers_no_offset(server: Server) -> None:
    """An unknown group is not an error: each asked partition answers offset -1."""
    response = await server.call(ApiKey.OFFSET_FETCH, 5, offset_fetch_sample(server.scene("never-seen")))
    assert response.error_code == ErrorCode.none
    assert response.topics[0].partitions[0].committed_offset == -1


# -- JoinGroup


@pytest.mark.parametrize(
    ("version", "expected"), [(4, ""), (5, ""), (6, ""), (7, None), (8, None), (9, None)]
)
async def test_join_group_protocol_name_is_empty_before_v7_and_null_after(
    server: Server, version: int, expected: str | None
) -> None:
    """The MEMBER_ID_REQUIRED answer has no protocol: "" before v7 (non-nullable), null from v7."""
    response = await server.call(ApiKey.JOIN_GROUP, version, join_sample(server.scene(f"join-{version}")))
    assert response.error_code == ErrorCode.member_id_required
    assert response.protocol_name == expected


@pytest.mark.parametrize(("version", "expected"), [(0, ""), (6, ""), (7, None)])
async def test_join_group_while_loading_answers_load_in_progress_in_the_version_shape(
    server: Server, version: int, expected: str | None
) -> None:
    """JoinGroup on a loading partition: COORDINATOR_LOAD_IN_PROGRESS, protocol name in the version's form."""
    scene = server.scene(f"join-loading-{version}")
    with server.loading(scene.group):
        response = await server.call(ApiKey.JOIN_GROUP, version, join_sample(scene))
    assert response.error_code == ErrorCode.coordinator_load_in_progress
    assert (response.generation_id, response.protocol_name) == (-1, expected)


# -- Heartbeat


@pytest.mark.parametrize("version", [0, 4])
async def test_heartbeat_while_loading_answers_none(server: Server, version: int) -> None:
    """A heartbeat to a loading partition answers NONE, so members do not rejoin needlessly."""
    scene = await stable_group(server, f"beat-{version}")
    body = {"group_id": scene.group, "generation_id": scene.generation, "member_id": scene.member_id}
    with server.loading(scene.group):
        response = await server.call(ApiKey.HEARTBEAT, version, body)
    assert response.error_code == ErrorCode.none
    stranger = await server.call(ApiKey.HEARTBEAT, version, {**body, "member_id": "nobody"})
    assert stranger.error_code == ErrorCode.unknown_member_id


# -- DescribeGroups


@pytest.mark.parametrize("version", [0, 5])
async def test_describe_groups_unknown_group_is_dead_without_error(server: Server, version: int) -> None:
    """Before v6 an unknown group is described as "Dead" with error NONE; an empty id is INVALID_GROUP_ID."""
    scene = await stable_group(server, f"describe-{version}")
    body = {"groups": [scene.group, "ghost", ""], "include_authorized_operations": False}
    known, ghost, unnamed = (await server.call(ApiKey.DESCRIBE_GROUPS, version, body)).groups
    assert (known.group_state, known.protocol_type, known.protocol_data) == ("Stable", "consumer", "range")
    assert [m.member_id for m in known.members] == [scene.member_id]
    assert (ghost.error_code, ghost.group_state, ghost.members) == (ErrorCode.none, "Dead", ())
    assert unnamed.error_code == ErrorCode.invalid_group_id


async def test_describe_groups_of_a_loading_partition_answers_per_group(server: Server) -> None:
    """A group on a loading partition is answered COORDINATOR_LOAD_IN_PROGRESS, its neighbours normally."""
    loading = await stable_group(server, "describe-loading-a")
    other = await stable_group(server, "describe-loading-b")
    body = {"groups": [loading.group, other.group]}
    with server.loading(loading.group):
        first, second = (await server.call(ApiKey.DESCRIBE_GROUPS, 0, body)).groups
    assert first.error_code == ErrorCode.coordinator_load_in_progress
    assert (second.error_code, second.group_state) == (ErrorCode.none, "Stable")


# -- ListGroups


async def test_list_groups_filters_by_state_and_type(server: Server) -> None:
    """v4 filters states case-insensitively; v5 filters types ("consumer" lists no classic group)."""
    await stable_group(server, "list-stable")
    await empty_group(server, "list-empty")
    everything = await server.call(ApiKey.LIST_GROUPS, 3, {})
    assert {g.group_id for g in everything.groups} == {"list-stable", "list-empty"}
    empty = await server.call(ApiKey.LIST_GROUPS, 4, {"states_filter": ["EMPTY"]})
    assert [(g.group_id, g.group_state) for g in empty.groups] == [("list-empty", "Empty")]
    classic = await server.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["Classic"]})
    assert {(g.group_id, g.group_type) for g in classic.groups} == {
        ("list-stable", "classic"),
        ("list-empty", "classic"),
    }
    consumer = await server.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
    assert (consumer.error_code, consumer.groups) == (ErrorCode.none, ())


async def test_list_groups_while_a_partition_loads_says_so(server: Server) -> None:
    """Groups of a loading partition are left out and the answer carries COORDINATOR_LOAD_IN_PROGRESS."""
    await empty_group(server, "list-a")
    with server.loading("list-a"):
        response = await server.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    assert response.error_code == ErrorCode.coordinator_load_in_progress
    assert "list-a" not in {g.group_id for g in response.groups}


# -- DeleteGroups


@pytest.mark.parametrize("version", [0, 2])
async def test_delete_groups_answers_each_group(server: Server, version: int) -> None:
    """An Empty group is deleted; one with members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND."""
    empty = await empty_group(server, f"delete-empty-{version}")
    busy = await stable_group(server, f"delete-busy-{version}")
    names = [empty.group, busy.group, "ghost", ""]
    response = await server.call(ApiKey.DELETE_GROUPS, version, {"groups_names": names})
    assert [(r.group_id, r.error_code) for r in response.results] == [
        (empty.group, ErrorCode.none),
        (busy.group, ErrorCode.non_empty_group),
        ("ghost", ErrorCode.group_id_not_found),
        ("", ErrorCode.invalid_group_id),
    ]
    fetched = await server.call(ApiKey.OFFSET_FETCH, 5, offset_fetch_sample(empty))
    assert fetched.topics[0].partitions[0].committed_offset == -1, "the deleted group's offsets went with it"
    again = await server.call(ApiKey.DELETE_GROUPS, version, {"groups_names": [empty.group]})
    assert again.results[0].error_code == ErrorCode.group_id_not_found
