"""Kafka's ACL model: a binding is a resource pattern plus an access control entry.

The numeric codes are Kafka's wire codes (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType`` in Kafka's clients), so a binding travels through CreateAcls/DescribeAcls/
DeleteAcls and the ACL file unchanged. ``ANY``/``MATCH``/``UNKNOWN`` only appear in filters.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from kcoord.security.principal import KafkaPrincipal

E = TypeVar("E", bound=IntEnum)

WILDCARD = "*"
"""A literal resource name matching every resource of its type; also "any principal/host" in an entry."""

WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
"""The only name a Cluster resource has."""


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}
"""What each resource type's ``authorized_operations`` bit set is computed over (as Kafka's)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not (permission) do what (operation) to which
    resources (type, name, pattern type)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission

    def validate(self) -> None:
        """Raises ValueError (with Kafka's wording where it has one) if this cannot be stored."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"Invalid patternType {self.pattern_type.name}")
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"Invalid operation {self.operation.name}")
        if self.permission not in (AclPermission.ALLOW, AclPermission.DENY):
            raise ValueError(f"Invalid permissionType {self.permission.name}")
        if not self.resource_name:
            raise ValueError("Resource name should not be empty")
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise ValueError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        KafkaPrincipal.parse(self.principal)
        if not self.host:
            raise ValueError("Host should not be empty")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: ``None`` names and ``ANY`` enums match everything;
    ``PatternType.MATCH`` selects the bindings that would apply to the named resource (literal
    name, literal ``*`` and every prefix of it)."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermission

    def validate(self) -> None:
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if value == 0:
                raise ValueError(f"Invalid filter: {type(value).__name__} UNKNOWN")

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_resource(binding) and self._matches_entry(binding)

    def _matches_resource(self, binding: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != binding.resource_type:
            return False
        name = self.resource_name
        if self.pattern_type is PatternType.MATCH:
            if name is None:
                return True
            if binding.pattern_type is PatternType.PREFIXED:
                return name.startswith(binding.resource_name)
            return binding.resource_name in (name, WILDCARD)
        if self.pattern_type is not PatternType.ANY and self.pattern_type != binding.pattern_type:
            return False
        return name is None or name == binding.resource_name

    def _matches_entry(self, binding: AclBinding) -> bool:
        return (
            (self.principal is None or self.principal == binding.principal)
            and (self.host is None or self.host == binding.host)
            and (self.operation is AclOperation.ANY or self.operation == binding.operation)
            and (self.permission is AclPermission.ANY or self.permission == binding.permission)
        )


def enum_or_unknown(kind: type[E], code: int) -> E:
    """The member of ``kind`` with ``code``, or its UNKNOWN member (code 0) for a code it lacks."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)
