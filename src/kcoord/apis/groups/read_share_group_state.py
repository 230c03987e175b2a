"""ReadShareGroupState (key 84), version 0: a share partition leader on another node reads the
durable state of its share partitions from this node's share coordinator (cluster mode only).

- v0: per partition the leader epoch the caller leads the topic partition under; the answer is the
  state epoch, start offset and state batches (Available, Acknowledged or Archived runs with their
  delivery counts).

Sent by kcoord nodes, never by clients (:mod:`kcoord.cluster.share_state_routing`). A newer leader
epoch than the stored one is made durable before the answer, so the previous leader's writes are
fenced; an older one is FENCED_LEADER_EPOCH. A share partition with no state answers state epoch 0
and start offset -1. NOT_COORDINATOR for a ``__share_group_state`` partition this node does not own,
COORDINATOR_LOAD_IN_PROGRESS while it loads.

Authorization: Cluster CLUSTER_ACTION, as Kafka: without it every partition is answered
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.groups.share_state_common import share_state_api
from kcoord.coordinator.share.state_records import ShareStateKey
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.share_coordinator import ShareCoordinator

__all__ = ["api"]


async def _read(coordinator: ShareCoordinator, key: ShareStateKey, partition: Any) -> dict[str, Any]:
    try:
        stored = await coordinator.read_for_leader(key, int(partition.leader_epoch))
    except KafkaError as exc:
        return _answer(key.partition, exc.code, exc.message)
    answer = _answer(key.partition, ErrorCode.none)
    if stored is not None:
        answer["state_epoch"] = stored.state_epoch
        answer["start_offset"] = stored.start_offset
        answer["state_batches"] = [
            {
                "first_offset": b.first_offset,
                "last_offset": b.last_offset,
                "delivery_state": b.delivery_state,
                "delivery_count": b.delivery_count,
            }
            for b in stored.state_batches
        ]
    return answer


def _answer(partition: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "partition": partition,
        "error_code": code,
        "error_message": message,
        "state_epoch": 0,
        "start_offset": -1,
        "state_batches": [],
    }


api = share_state_api(ApiKey.READ_SHARE_GROUP_STATE, "ReadShareGroupState", 0, 0, _read, _answer)
