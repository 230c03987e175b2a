"""A commit queued behind its member's own parked JoinGroup is answered for the generation that join ends.

librdkafka's cooperative members go on consuming while they rejoin, and send their commits on the
coordinator connection that holds their parked JoinGroup. As in Kafka (whose network layer mutes a
channel until its response is sent), such a commit is handled only once the join completes, when the
generation it carries is the previous one: ILLEGAL_GENERATION, although the same commit was valid
when it was sent (Kafka accepts a current-generation commit while the group prepares a rebalance).
librdkafka does not retry it; tests/groups/consumer_driver.py commits again once the group is stable.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient, connected, running_app
from tests.protocol.request_samples import Scene, commit_sample, create_topic, join_sample, sync_sample

QUIET_S = 0.5


def _commit_error(response: Any) -> ErrorCode:
    return ErrorCode(response.topics[0].partitions[0].error_code)


async def _new_member(scene: Scene) -> None:
    """The MEMBER_ID_REQUIRED round: the scene gets its member id and has not joined yet."""
    first = await scene.client.call(ApiKey.JOIN_GROUP, 5, join_sample(scene))
    assert first.error_code == ErrorCode.member_id_required
    scene.member_id = first.member_id


async def _joined(scene: Scene, correlation_id: int) -> Any:
    joined = await scene.client.recv(ApiKey.JOIN_GROUP, 5, correlation_id)
    assert joined.error_code == ErrorCode.none
    scene.generation = int(joined.generation_id)
    return joined


async def _form_pair(leader: Scene, follower: Scene) -> None:
    """``leader`` forms the group alone, then ``follower`` joins: both Stable in one generation."""
    await _new_member(leader)
    await _joined(leader, await leader.client.send(ApiKey.JOIN_GROUP, 5, join_sample(leader)))
    await _sync(leader)
    await _new_member(follower)
    follower_join = await follower.client.send(ApiKey.JOIN_GROUP, 5, join_sample(follower))
    joined = await _joined(leader, await leader.client.send(ApiKey.JOIN_GROUP, 5, join_sample(leader)))
    assert joined.leader == leader.member_id
    await _joined(follower, follower_join)
    follower_sync = await follower.client.send(ApiKey.SYNC_GROUP, 3, sync_sample(follower))
    await _sync(leader)
    synced = await follower.client.recv(ApiKey.SYNC_GROUP, 3, follower_sync)
    assert synced.error_code == ErrorCode.none


async def _sync(scene: Scene) -> None:
    synced = await scene.client.call(ApiKey.SYNC_GROUP, 3, sync_sample(scene))
    assert synced.error_code == ErrorCode.none


async def _nothing_within(client: AsyncRawClient, seconds: float) -> bool:
    try:
        await client.recv_frame(within_s=seconds)
    except TimeoutError:
        return True
    return False


async def test_commit_behind_own_parked_join_is_refused_for_the_old_generation(tmp_path: Path) -> None:
    """A commit pipelined behind its member's parked JoinGroup is answered after that join, with
    ILLEGAL_GENERATION, while the same generation's commit on a free connection is accepted meanwhile."""
    async with (
        running_app(tmp_path) as (app, port),
        connected(port, client_id="a") as a_conn,
        connected(port, client_id="c") as c_conn,
        connected(port, client_id="b") as b_conn,
    ):
        scenes = [
            Scene(conn, 0, port, app.node.node_id, topic="behind-join", group="behind-join-group")
            for conn in (a_conn, c_conn, b_conn)
        ]
        a, c, b = scenes
        await create_topic(a)
        await _form_pair(a, c)
        before = a.generation

        # 1. A new member joins: the group prepares a rebalance and waits for A and C to rejoin.
        await _new_member(b)
        b_join = await b.client.send(ApiKey.JOIN_GROUP, 5, join_sample(b))
        # 2. A rejoins and commits right behind on the same connection (as librdkafka does).
        a_join = await a.client.send(ApiKey.JOIN_GROUP, 5, join_sample(a))
        a_commit = await a.client.send(ApiKey.OFFSET_COMMIT, 8, commit_sample(a, offset=50))
        assert await _nothing_within(a.client, QUIET_S), "A's parked JoinGroup or its commit was answered"
        # 3. Meanwhile C commits in the same generation on its own connection: accepted.
        accepted = await c.client.call(ApiKey.OFFSET_COMMIT, 8, commit_sample(c, offset=7), within_s=QUIET_S)
        assert _commit_error(accepted) == ErrorCode.none
        # 4. C rejoins: the join completes, then A's commit is handled, for the generation just ended.
        c_join = await c.client.send(ApiKey.JOIN_GROUP, 5, join_sample(c))
        await asyncio.gather(_joined(a, a_join), _joined(c, c_join), _joined(b, b_join))
        assert a.generation == before + 1
        refused = await a.client.recv(ApiKey.OFFSET_COMMIT, 8, a_commit)
        assert _commit_error(refused) == ErrorCode.illegal_generation
        # 5. Committed again once the group is stable (what the test driver does): accepted.
        await _sync(a)
        again = await a.client.call(ApiKey.OFFSET_COMMIT, 8, commit_sample(a, offset=50))
        assert _commit_error(again) == ErrorCode.none
