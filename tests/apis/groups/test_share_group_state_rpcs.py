"""Read/WriteShareGroupState called directly, as another node's share partition leader sends them:
a write then a read round-trip the state over the wire, a newer leader epoch fences the older writer,
and without Cluster CLUSTER_ACTION every partition is refused and nothing is written."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kcoord.apis.groups import read_share_group_state, write_share_group_state
from kcoord.coordinator.share.state_records import ShareStateKey
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.share_coordinator import ShareCoordinator, ShareStateTopicOf, new_state_shard
from kcoord.security.acl import AclOperation, ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.clock import SystemClock
from tests.apis.broker.data_path_helpers import context, on_the_wire, request
from tests.runtime.test_share_partition_leader import CONFIG, Catalogue

TOPIC_ID = uuid.UUID(int=11)
READ, WRITE = ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE


class _NoClusterAction(Authorizer):
    """Allows everything but CLUSTER_ACTION on the cluster."""

    enabled = True

    def authorize(
        self, principal: Any, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        return not (resource_type == ResourceType.CLUSTER and operation == AclOperation.CLUSTER_ACTION)


@pytest.fixture
async def coordinator() -> AsyncIterator[ShareCoordinator]:
    store = MemoryLogStore()
    await store.open()
    catalogue = Catalogue(store)
    state = ShareCoordinator(
        ShareStateTopicOf(catalogue, catalogue.state_partitions, catalogue.create),
        SystemClock(),
        new_state_shard(CONFIG),
        num_partitions=2,
    )
    await state.ensure_started()
    yield state
    await state.stop()
    await store.close()


async def write(
    coordinator: ShareCoordinator,
    leader_epoch: int,
    start_offset: int,
    batches: list[tuple[int, int, int, int]],
    authorizer: Authorizer | None = None,
) -> int:
    partition = {
        "partition": 0,
        "state_epoch": 0,
        "leader_epoch": leader_epoch,
        "start_offset": start_offset,
        "delivery_complete_count": -1,
        "state_batches": [
            {"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
            for f, la, s, c in batches
        ],
    }
    body = {"group_id": "g", "topics": [{"topic_id": TOPIC_ID, "partitions": [partition]}]}
    response = await write_share_group_state.api.handler(
        context(WRITE, 1),
        request(WRITE, 1, body),
        coordinator=coordinator,
        authorizer=authorizer or Authorizer(),
    )
    (result,) = on_the_wire(WRITE, 1, response).results[0].partitions
    return int(result.error_code)


async def read(coordinator: ShareCoordinator, leader_epoch: int, authorizer: Authorizer | None = None) -> Any:
    body = {
        "group_id": "g",
        "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition": 0, "leader_epoch": leader_epoch}]}],
    }
    response = await read_share_group_state.api.handler(
        context(READ, 0),
        request(READ, 0, body),
        coordinator=coordinator,
        authorizer=authorizer or Authorizer(),
    )
    (result,) = on_the_wire(READ, 0, response).results[0].partitions
    return result


async def test_a_written_state_reads_back_and_a_newer_leader_fences_the_older(
    coordinator: ShareCoordinator,
) -> None:
    """No state reads as state epoch 0, start -1; a write under epoch 1 reads back whole; a read under
    epoch 2 fences the epoch-1 writer (FENCED_LEADER_EPOCH) and a read under epoch 1 with it."""
    nothing = await read(coordinator, 1)
    assert (int(nothing.error_code), int(nothing.start_offset), nothing.state_batches) == (0, -1, ())
    assert await write(coordinator, 1, 3, [(3, 5, 2, 1), (6, 6, 0, 2)]) == ErrorCode.none
    stored = await read(coordinator, 2)
    assert (int(stored.error_code), int(stored.state_epoch), int(stored.start_offset)) == (0, 0, 3)
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in stored.state_batches
    ] == [
        (3, 5, 2, 1),
        (6, 6, 0, 2),
    ]
    assert await write(coordinator, 1, -1, [(6, 6, 2, 2)]) == ErrorCode.fenced_leader_epoch
    assert int((await read(coordinator, 1)).error_code) == ErrorCode.fenced_leader_epoch
    assert await write(coordinator, 2, -1, [(6, 6, 2, 2)]) == ErrorCode.none


async def test_the_state_rpcs_need_cluster_action(coordinator: ShareCoordinator) -> None:
    """Without Cluster CLUSTER_ACTION both are CLUSTER_AUTHORIZATION_FAILED and nothing is written."""
    refused = _NoClusterAction()
    assert await write(coordinator, 1, 3, [(3, 5, 2, 1)], refused) == ErrorCode.cluster_authorization_failed
    assert int((await read(coordinator, 1, refused)).error_code) == ErrorCode.cluster_authorization_failed
    assert coordinator.read_state(ShareStateKey("g", TOPIC_ID, 0)) is None
