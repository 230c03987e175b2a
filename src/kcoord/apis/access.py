"""The edge's questions to the authorizer, asked with the request's principal and client host."""

from __future__ import annotations

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

Op = AclOperation
"""Short name for the operations handlers check."""

OPERATIONS_OMITTED = -2147483648
"""``authorized_operations`` when the request did not ask for them (Kafka's Integer.MIN_VALUE)."""


def may(ctx: RequestContext, authorizer: Authorizer, op: AclOperation, kind: ResourceType, name: str) -> bool:
    return authorizer.authorize(ctx.principal, ctx.client_host, op, kind, name)


def may_topic(ctx: RequestContext, authorizer: Authorizer, op: AclOperation, topic: str) -> bool:
    return may(ctx, authorizer, op, ResourceType.TOPIC, topic)


def may_group(ctx: RequestContext, authorizer: Authorizer, op: AclOperation, group: str) -> bool:
    return may(ctx, authorizer, op, ResourceType.GROUP, group)


def may_cluster(ctx: RequestContext, authorizer: Authorizer, op: AclOperation) -> bool:
    return may(ctx, authorizer, op, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized_operations(
    ctx: RequestContext, authorizer: Authorizer, kind: ResourceType, name: str, *, asked: bool
) -> int:
    """The resource's ``authorized_operations`` bit set, or Kafka's "omitted" value when not asked."""
    if not asked:
        return OPERATIONS_OMITTED
    return authorizer.authorized_operations(ctx.principal, ctx.client_host, kind, name)


def cluster_operations(ctx: RequestContext, authorizer: Authorizer, *, asked: bool) -> int:
    """The cluster's ``authorized_operations`` as Kafka answers them: omitted when not asked, 0
    for a principal that may not DESCRIBE the cluster, else its bit set."""
    if asked and not may_cluster(ctx, authorizer, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, authorizer, ResourceType.CLUSTER, CLUSTER_NAME, asked=asked)


def require_group(ctx: RequestContext, authorizer: Authorizer, op: AclOperation, group: str) -> None:
    """Raises GROUP_AUTHORIZATION_FAILED unless the principal may do ``op`` to the group.

    Every group request asks (heartbeats too), so without an authorizer nothing more is asked."""
    if authorizer.enabled and not may_group(ctx, authorizer, op, group):
        raise KafkaError(
            ErrorCode.group_authorization_failed, f"Group {op.name} on {group!r} is not authorized."
        )


def require_named_group(ctx: RequestContext, authorizer: Authorizer, op: AclOperation, group: str) -> None:
    """INVALID_GROUP_ID for an empty group id, then :func:`require_group`."""
    if not group:
        raise KafkaError(ErrorCode.invalid_group_id)
    require_group(ctx, authorizer, op, group)
