"""ShareAcknowledge (key 79), versions 1-2: acknowledgements of a share group member, without a fetch.

- v0 was Kafka 4.0's early-access version and is not served.
- v1: the share session epoch (0 may not open a session: INVALID_SHARE_SESSION_EPOCH; -1 closes
  it once the acknowledgements are settled, releasing what the member still holds) and per
  partition its acknowledgement batches (1 accept, 2 release, 3 reject, 0 a gap).
- v2 (KIP-1222): a renew acknowledgement (type 4) extends the record's acquisition lock by
  ``group.share.record.lock.duration.ms`` from now, writes nothing and is answered at once (Kafka's
  ``SharePartition``); ``is_renew_ack`` says the request carries one, and the answer gives the
  ``acquisition_lock_timeout``. In a v1 request type 4 is INVALID_REQUEST.

Each partition's answer goes out once its new state is durable in ``__share_group_state``: an
acknowledged record is never delivered again, even after a crash.

Authorization, as Kafka 4.2: Group READ on the share group (else GROUP_AUTHORIZATION_FAILED for the
whole request), Topic READ per topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.broker.share_partitions_common import (
    SharePartitionsApi,
    SharePartitionsEdge,
    acknowledgements,
    current_leader,
    error_response,
)
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.share_partition_leader import TopicIdPartition
from kcoord.server.context import RequestContext


async def handle_share_acknowledge(
    ctx: RequestContext, request: Any, *, edge: SharePartitionsEdge
) -> dict[str, Any]:
    leader = edge.leader
    group_id, member_id = edge.member(ctx, request)
    session = leader.sessions.acknowledge(group_id, member_id, int(request.share_session_epoch))
    answers: dict[TopicIdPartition, dict[str, Any]] = {}
    for topic in request.topics:
        refused = edge.readable(ctx, topic.topic_id)
        for p in topic.partitions:
            tp = (topic.topic_id, int(p.partition_index))
            code = refused
            if code == ErrorCode.none:
                code = await _acknowledge(edge, group_id, member_id, tp, p, ctx.api_version)
            answers[tp] = {
                "partition_index": tp[1],
                "error_code": code,
                "error_message": None,
                "current_leader": current_leader(edge.node_id),
            }
    if session is None:
        leader.release_member(group_id, member_id)
    return edge.response(answers)


async def _acknowledge(
    edge: SharePartitionsEdge,
    group_id: str,
    member_id: str,
    tp: TopicIdPartition,
    partition: Any,
    version: int,
) -> ErrorCode:
    try:
        batches = acknowledgements(partition, version)
    except KafkaError as exc:
        return exc.code
    return await edge.leader.acknowledge(group_id, member_id, tp, batches)


api = SharePartitionsApi(
    ApiKey.SHARE_ACKNOWLEDGE, "ShareAcknowledge", 1, 2, handle_share_acknowledge, error_response
)
