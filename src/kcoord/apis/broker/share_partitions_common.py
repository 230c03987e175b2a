"""What ShareFetch and ShareAcknowledge share: the parts that serve them (one edge object: the
member check, topic ids to names under Topic READ, the answer's shape), their wiring and error
answer, and acknowledgement batches."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kcoord.apis.access import Op, may_topic, require_group
from kcoord.apis.wiring import DeclaredApi
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.runtime.share_partition_leader import AcknowledgementBatch, SharePartitionLeader, TopicIdPartition
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

TopicNameOf = Callable[[uuid.UUID], "str | None"]


@dataclass(frozen=True, slots=True)
class SharePartitionsEdge:
    """What ShareFetch and ShareAcknowledge are served by: this node's share partition leader,
    topic ids to names, the node id (each partition's ``current_leader``) and the authorizer."""

    leader: SharePartitionLeader
    name_of: TopicNameOf
    node_id: int
    authorizer: Authorizer

    def member(self, ctx: RequestContext, request: Any) -> tuple[str, str]:
        """The request's group and member ids, both named, and the caller may READ the group."""
        group_id, member_id = request.group_id or "", request.member_id or ""
        if not group_id or not member_id:
            raise KafkaError(ErrorCode.invalid_request, "GroupId and MemberId must not be empty.")
        require_group(ctx, self.authorizer, Op.READ, group_id)
        return group_id, member_id

    def readable(self, ctx: RequestContext, topic_id: uuid.UUID | None) -> ErrorCode:
        """NONE when the topic exists and the principal may READ it; else the partition's error."""
        name = None if topic_id is None else self.name_of(topic_id)
        if name is None:
            return ErrorCode.unknown_topic_id
        if not may_topic(ctx, self.authorizer, Op.READ, name):
            return ErrorCode.topic_authorization_failed
        return ErrorCode.none

    def response(self, answers: dict[TopicIdPartition, dict[str, Any]]) -> dict[str, Any]:
        """The whole answer: the partitions' answers by topic and the lock duration."""
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "acquisition_lock_timeout": self.leader.config.record_lock_duration_ms,
            "responses": by_topic(answers),
            "node_endpoints": [],
        }


class SharePartitionsApi(DeclaredApi):
    """ShareFetch or ShareAcknowledge: its handler takes the :class:`SharePartitionsEdge`."""

    __slots__ = ()

    def __call__(
        self, leader: SharePartitionLeader, name_of: TopicNameOf, node_id: int, *, authorizer: Authorizer
    ) -> ApiSpec:
        return self.bind(edge=SharePartitionsEdge(leader, name_of, node_id, authorizer))


def error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    """ShareFetch's and ShareAcknowledge's answer of a refused request."""
    return {"error_code": code, "acquisition_lock_timeout": 0, "responses": [], "node_endpoints": []}


RENEW = 4
"""KIP-1222's renew acknowledgement type, defined from ShareFetch and ShareAcknowledge v2 on."""


def acknowledgements(partition: Any, version: int) -> list[AcknowledgementBatch]:
    """A partition's acknowledgement batches; a renewal in a v1 request is INVALID_REQUEST."""
    batches = [
        (int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types))
        for b in partition.acknowledgement_batches
    ]
    if version < 2 and any(RENEW in types for _, _, types in batches):
        raise KafkaError(ErrorCode.invalid_request, "a renew acknowledgement needs version 2")
    return batches


def by_topic(answers: dict[TopicIdPartition, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-partition answers grouped by topic id, in a stable order."""
    topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, _), answer in sorted(answers.items(), key=lambda item: (str(item[0][0]), item[0][1])):
        topics.setdefault(topic_id, []).append(answer)
    return [{"topic_id": topic_id, "partitions": partitions} for topic_id, partitions in topics.items()]


def current_leader(node_id: int) -> dict[str, int]:
    return {"leader_id": node_id, "leader_epoch": 0}
