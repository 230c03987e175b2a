"""What CreateAcls, DescribeAcls and DeleteAcls share: their wiring, bindings and filters to and
from the wire, and the checks that come first (an authorizer is configured; the caller may touch
ACLs)."""

from __future__ import annotations

from typing import Any, TypeVar

from kcoord.apis.access import may_cluster
from kcoord.apis.wiring import DeclaredApi
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
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

_Acl = TypeVar("_Acl", AclBinding, AclBindingFilter)


class AclApi(DeclaredApi):
    """An ACL API: its handler takes the authorizer alone."""

    __slots__ = ()

    def __call__(self, authorizer: Authorizer) -> ApiSpec:
        return self.bind(authorizer=authorizer)


def acl_authorizer(ctx: RequestContext, authorizer: Authorizer, op: AclOperation) -> AclAuthorizer:
    """The ACL authorizer if one is configured and the caller may do ``op`` to the cluster."""
    if not isinstance(authorizer, AclAuthorizer):
        raise KafkaError(ErrorCode.security_disabled, "No Authorizer is configured.")
    if not may_cluster(ctx, authorizer, op):
        raise KafkaError(ErrorCode.cluster_authorization_failed, f"Cluster {op.name} is not authorized.")
    return authorizer


def binding_from_wire(creation: Any) -> AclBinding:
    """A CreateAcls creation as a validated binding; raises KafkaError(INVALID_REQUEST) if invalid."""
    pattern_type = getattr(creation, "resource_pattern_type", PatternType.LITERAL)
    resource = (creation.resource_type, creation.resource_name, pattern_type)
    return _from_wire(AclBinding, resource, creation.principal, creation.host, creation)


def filter_from_wire(item: Any) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls filter; raises KafkaError(INVALID_REQUEST) if invalid."""
    pattern_type = getattr(item, "pattern_type_filter", PatternType.LITERAL)
    resource = (item.resource_type_filter, item.resource_name_filter, pattern_type)
    return _from_wire(AclBindingFilter, resource, item.principal_filter, item.host_filter, item)


def _from_wire(
    make: type[_Acl], resource: tuple[Any, Any, Any], principal: Any, host: Any, item: Any
) -> _Acl:
    """A binding or filter from its wire fields (enums read leniently: an unknown id is UNKNOWN),
    then the model's own checks."""
    resource_type, resource_name, pattern_type = resource
    value = make(
        enum_or_unknown(ResourceType, resource_type),
        resource_name,
        enum_or_unknown(PatternType, pattern_type),
        principal,
        host,
        enum_or_unknown(AclOperation, item.operation),
        enum_or_unknown(AclPermission, item.permission_type),
    )
    _validate(value)
    return value


def _validate(value: AclBinding | AclBindingFilter) -> None:
    """The model's own checks, answered as INVALID_REQUEST."""
    try:
        value.validate()
    except ValueError as exc:
        raise KafkaError(ErrorCode.invalid_request, str(exc)) from exc
