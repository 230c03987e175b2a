"""What CreateAcls, DescribeAcls and DeleteAcls share: bindings and filters to and from the wire,
and the checks that come first (an authorizer is configured; the caller may touch ACLs)."""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import may_cluster
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
    enum_or_unknown,
)
from kcoord.security.authorizer import AclAuthorizer, Authorizer
from kcoord.server.context import RequestContext


def acl_authorizer(ctx: RequestContext, authorizer: Authorizer, op: AclOperation) -> AclAuthorizer:
    """The ACL authorizer if one is configured and the caller may do ``op`` to the cluster."""
    if not isinstance(authorizer, AclAuthorizer):
        raise KafkaError(ErrorCode.security_disabled, "No Authorizer is configured.")
    if not may_cluster(ctx, authorizer, op):
        raise KafkaError(ErrorCode.cluster_authorization_failed, f"Cluster {op.name} is not authorized.")
    return authorizer


def binding_from_wire(creation: Any) -> AclBinding:
    """A CreateAcls creation as a validated binding; raises KafkaError(INVALID_REQUEST) if invalid."""
    binding = AclBinding(
        enum_or_unknown(ResourceType, creation.resource_type),
        creation.resource_name,
        enum_or_unknown(PatternType, getattr(creation, "resource_pattern_type", PatternType.LITERAL)),
        creation.principal,
        creation.host,
        enum_or_unknown(AclOperation, creation.operation),
        enum_or_unknown(AclPermission, creation.permission_type),
    )
    _validate(binding)
    return binding


def filter_from_wire(item: Any) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls filter; raises KafkaError(INVALID_REQUEST) if invalid."""
    acl_filter = AclBindingFilter(
        enum_or_unknown(ResourceType, item.resource_type_filter),
        item.resource_name_filter,
        enum_or_unknown(PatternType, getattr(item, "pattern_type_filter", PatternType.LITERAL)),
        item.principal_filter,
        item.host_filter,
        enum_or_unknown(AclOperation, item.operation),
        enum_or_unknown(AclPermission, item.permission_type),
    )
    _validate(acl_filter)
    return acl_filter


def _validate(value: AclBinding | AclBindingFilter) -> None:
    """The model's own checks, answered as INVALID_REQUEST."""
    try:
        value.validate()
    except ValueError as exc:
        raise KafkaError(ErrorCode.invalid_request, str(exc)) from exc
