"""WriteShareGroupState (key 85), versions 0-1: a share partition leader on another node writes the
changed state of a share partition to this node's share coordinator (cluster mode only).

- v0: per partition the state epoch and leader epoch of the writer, the new start offset (-1:
  unchanged) and the changed state batches.
- v1: ``delivery_complete_count`` (the records at or past the start offset whose delivery is
  complete), kept for the lag of DescribeShareGroupOffsets.

Sent by kcoord nodes, never by clients (:mod:`kcoord.cluster.share_state_routing`). Each partition is
answered once its ShareUpdate or ShareSnapshot is durable; an older state or leader epoch than the
stored one is FENCED_STATE_EPOCH or FENCED_LEADER_EPOCH and writes nothing. NOT_COORDINATOR for a
``__share_group_state`` partition this node does not own.

Authorization: Cluster CLUSTER_ACTION, as Kafka: without it every partition is answered
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.groups.share_state_common import share_state_api
from kcoord.coordinator.share.partition_state import StateBatch
from kcoord.coordinator.share.partitions import StateWrite
from kcoord.coordinator.share.state_records import ShareStateKey
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.share_coordinator import ShareCoordinator

__all__ = ["api"]


async def _write(coordinator: ShareCoordinator, key: ShareStateKey, partition: Any) -> dict[str, Any]:
    write = StateWrite(
        key,
        int(partition.state_epoch),
        int(partition.start_offset),
        tuple(
            StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
            for b in partition.state_batches
        ),
        int(getattr(partition, "delivery_complete_count", -1)),
    )
    try:
        await coordinator.ensure_started()
        code = await coordinator.write_state(write, int(partition.leader_epoch))
    except KafkaError as exc:
        code = exc.code
    return _answer(key.partition, code)


def _answer(partition: int, code: ErrorCode) -> dict[str, Any]:
    return {"partition": partition, "error_code": code}


api = share_state_api(ApiKey.WRITE_SHARE_GROUP_STATE, "WriteShareGroupState", 0, 1, _write, _answer)
