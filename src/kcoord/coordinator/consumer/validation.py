"""The checks of consumer-group requests that change nothing: a heartbeat's fields, a member's
epoch, and OffsetFetch/OffsetCommit members (Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``
and ``validateOffsetCommit``/``validateOffsetFetch`` for consumer groups)."""

from __future__ import annotations

from collections.abc import Collection

from kcoord.coordinator.assignors.api import Assignment
from kcoord.coordinator.consumer.group import ConsumerGroup
from kcoord.coordinator.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
)
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest
from kcoord.coordinator.record_codec import fits_record_string
from kcoord.protocol.errors import ErrorCode, KafkaError


def validate_heartbeat(request: ConsumerHeartbeatRequest, assignors: Collection[str]) -> None:
    """The checks that need no group: INVALID_REQUEST and UNSUPPORTED_ASSIGNOR."""
    if not request.group_id:
        raise KafkaError(ErrorCode.invalid_request, "GroupId can't be empty.")
    if request.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise KafkaError(ErrorCode.invalid_request, "MemberEpoch is invalid.")
    if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.subscribed_topics is None and request.subscribed_topic_regex is None:
            raise KafkaError(
                ErrorCode.invalid_request,
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
            )
    elif request.member_epoch > 0 and not request.member_id:
        raise KafkaError(ErrorCode.invalid_request, "MemberId can't be empty.")
    texts = (
        request.group_id,
        request.member_id,
        request.instance_id,
        request.rack_id,
        request.subscribed_topic_regex,
        request.client_id,
        request.client_host,
        *(request.subscribed_topics or ()),
    )
    if not all(fits_record_string(text) for text in texts):
        # It could never be written to the offsets log: refuse it before it changes anything.
        raise KafkaError(ErrorCode.invalid_request, "a string of the heartbeat is too long")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise KafkaError(
            ErrorCode.unsupported_assignor, f"ServerAssignor {request.server_assignor} is not supported."
        )


def validate_offset_fetch(group: ConsumerGroup | None, member_id: str | None, member_epoch: int) -> None:
    """OffsetFetch v9's member check on a consumer group, as Kafka: without a member id and with
    a negative epoch (admin clients, classic members) the fetch is accepted; otherwise the
    member must exist (UNKNOWN_MEMBER_ID) and send its current epoch (STALE_MEMBER_EPOCH)."""
    if group is None or (not member_id and member_epoch < 0):
        return
    member = group.members.get(member_id or "")
    if member is None:
        raise KafkaError(ErrorCode.unknown_member_id, f"member {member_id} is unknown")
    if member_epoch != member.member_epoch:
        raise KafkaError(
            ErrorCode.stale_member_epoch,
            f"epoch {member_epoch} is not the member's epoch {member.member_epoch}",
        )


def validate_offset_commit(group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int) -> None:
    """Kafka's rules for commits to a consumer group (an empty group takes admin commits)."""
    if member_epoch < 0 and not member_id and not group.members:
        return
    member = group.members.get(member_id)
    if member is None:
        raise KafkaError(ErrorCode.unknown_member_id, f"member {member_id} is unknown")
    if member_epoch != member.member_epoch:
        classic_rules = api_version < 9 or member.uses_classic_protocol
        code = ErrorCode.illegal_generation if classic_rules else ErrorCode.stale_member_epoch
        raise KafkaError(code, f"epoch {member_epoch} is not the member's epoch {member.member_epoch}")


def check_epoch(member: ConsumerGroupMember, request: ConsumerHeartbeatRequest) -> None:
    """Kafka's fencing: the current epoch, or the previous one when the answer to it was lost."""
    if request.member_epoch == member.member_epoch:
        return
    if (
        request.member_epoch < member.member_epoch
        and request.member_epoch == member.previous_member_epoch
        and request.owned is not None
        and subset(request.owned, member.assigned)
    ):
        return
    raise KafkaError(
        ErrorCode.fenced_member_epoch,
        f"epoch {request.member_epoch} does not match the member's epoch {member.member_epoch}",
    )


def subset(small: Assignment, big: Assignment) -> bool:
    return all(parts <= big.get(topic, frozenset()) for topic, parts in small.items())


def same(a: Assignment, b: Assignment) -> bool:
    return {t: p for t, p in a.items() if p} == {t: p for t, p in b.items() if p}
