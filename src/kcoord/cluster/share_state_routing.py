"""The share coordinator's state RPCs for the whole cluster: local calls for the ``__share_group_state``
partitions this node owns, ReadShareGroupState / WriteShareGroupState to the node that owns the others.

A share partition lives with its topic partition's owner, but its durable state lives on partition
``partition_for("group:topicId:partition")`` of ``__share_group_state``, which the membership may
give to another node. Kafka's share partition leader reaches the share coordinator through its
persister with these RPCs; so does :class:`RoutingShareState`, over one connection per node and
API (:class:`~kcoord.cluster.node_connection.NodeConnection`), as transaction markers reach other
nodes' data partitions (:mod:`kcoord.cluster.marker_routing`).

- A read carries the leader epoch the caller leads the topic partition under; the owner makes a
  newer one durable before it answers, fencing the previous leader's writes (FENCED_LEADER_EPOCH).
- A state nobody wrote yet travels as state epoch 0 and start offset -1, which the leader loads as
  it loads no state (from ``share.auto.offset.reset``).
- A call that cannot reach the owner drops the connection and answers COORDINATOR_NOT_AVAILABLE
  (the leader answers its client with a retriable error; the next call finds the owner anew).

The admin calls (initialize, the stored state, deletes) stay local: the offsets APIs of share groups
are not served in a cluster yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import structlog

from kcoord.cluster.node_connection import CALL_FAILURES, NodeConnection
from kcoord.coordinator.share.partition_state import StateBatch
from kcoord.coordinator.share.partitions import StateWrite
from kcoord.coordinator.share.state_calls import ShareStateCalls
from kcoord.coordinator.share.state_records import SHARE_STATE_TOPIC, ShareStateKey
from kcoord.coordinator.share.state_shard import StoredShareState
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = ["LocalShareState", "RoutingShareState"]

log = structlog.get_logger(__name__)

READ_VERSION, WRITE_VERSION = 0, 1
CLIENT_ID = "kcoord-share-partition-leader"

OwnerOf = Callable[[str, int], "tuple[str, int] | None"]
"""``(topic, partition) -> (host, port)`` of the live node that owns it, None for this node or none."""


class LocalShareState(ShareStateCalls, Protocol):
    """This node's share coordinator (:class:`~kcoord.runtime.share_coordinator.ShareCoordinator`)."""

    async def ensure_started(self) -> None: ...

    def partition_for(self, key: str) -> int: ...


class RoutingShareState:
    """The share state of any share partition, wherever its ``__share_group_state`` partition is."""

    def __init__(self, local: LocalShareState, owner_of: OwnerOf) -> None:
        self._local = local
        self._owner_of = owner_of
        self._connections: dict[tuple[str, int, int], NodeConnection] = {}

    async def read_for_leader(self, key: ShareStateKey, leader_epoch: int = -1) -> StoredShareState | None:
        owner = await self._owner(key)
        if owner is None:
            return await self._local.read_for_leader(key, leader_epoch)
        partition = {"partition": key.partition, "leader_epoch": leader_epoch}
        body = {"group_id": key.group_id, "topics": [{"topic_id": key.topic_id, "partitions": [partition]}]}
        response = await self._call(owner, ApiKey.READ_SHARE_GROUP_STATE, READ_VERSION, body)
        if response is None:
            raise KafkaError(ErrorCode.coordinator_not_available, "the share coordinator is unreachable")
        (result,) = response.results[0].partitions
        code = ErrorCode(int(result.error_code))
        if code != ErrorCode.none:
            raise KafkaError(code, result.error_message or f"ReadShareGroupState: {code.name}")
        batches = tuple(
            StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
            for b in result.state_batches
        )
        return StoredShareState(0, int(result.state_epoch), leader_epoch, int(result.start_offset), batches)

    async def write_state(self, write: StateWrite, leader_epoch: int = -1) -> ErrorCode:
        owner = await self._owner(write.key)
        if owner is None:
            return await self._local.write_state(write, leader_epoch)
        partition = {
            "partition": write.key.partition,
            "state_epoch": write.state_epoch,
            "leader_epoch": leader_epoch,
            "start_offset": write.start_offset,
            "delivery_complete_count": write.delivery_complete_count,
            "state_batches": [
                {
                    "first_offset": b.first_offset,
                    "last_offset": b.last_offset,
                    "delivery_state": b.delivery_state,
                    "delivery_count": b.delivery_count,
                }
                for b in write.batches
            ],
        }
        body = {
            "group_id": write.key.group_id,
            "topics": [{"topic_id": write.key.topic_id, "partitions": [partition]}],
        }
        response = await self._call(owner, ApiKey.WRITE_SHARE_GROUP_STATE, WRITE_VERSION, body)
        if response is None:
            return ErrorCode.coordinator_not_available
        (result,) = response.results[0].partitions
        return ErrorCode(int(result.error_code))

    async def initialize_state(self, key: ShareStateKey, start_offset: int) -> ErrorCode:
        return await self._local.initialize_state(key, start_offset)

    async def stored_state(self, key: ShareStateKey) -> StoredShareState | None:
        return await self._local.stored_state(key)

    async def delete_states(self, keys: list[ShareStateKey]) -> None:
        await self._local.delete_states(keys)

    async def delete_group_states(self, group_ids: list[str]) -> None:
        await self._local.delete_group_states(group_ids)

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    async def _owner(self, key: ShareStateKey) -> tuple[str, int] | None:
        """The owner of the key's state partition, None for this node (the topic is made first)."""
        await self._local.ensure_started()
        return self._owner_of(SHARE_STATE_TOPIC, self._local.partition_for(key.coordinator_key))

    async def _call(self, owner: tuple[str, int], api_key: ApiKey, version: int, body: dict[str, Any]) -> Any:
        """The owner's response, or None when it could not be reached (the connection is dropped)."""
        address = (*owner, int(api_key))
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = NodeConnection(*owner, api_key, version, CLIENT_ID)
        try:
            return await connection.call(body)
        except CALL_FAILURES as exc:
            log.warning(
                "share_state.remote_failed", node=f"{owner[0]}:{owner[1]}", api=api_key.name, error=repr(exc)
            )
            connection.close()
            self._connections.pop(address, None)
            return None
