"""Decides a request against a set of ACL bindings, the way Kafka's AclAuthorizer and
StandardAuthorizer do (behaviour read from them, not their code):

1. The bindings that apply to a resource are its literal ones, the literal ``*`` of its type and
   every prefixed binding whose prefix starts its name.
2. If none apply, the answer is ``allow.everyone.if.no.acl.found``.
3. A DENY for the principal (or ``User:*``) from its host (or ``*``) naming the operation (or ALL)
   wins over everything.
4. Otherwise an ALLOW naming the operation, ALL, or an operation that implies it grants it:
   DESCRIBE is implied by READ, WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS.

Super users are the caller's business (:mod:`kcoord.security.authorizer`): this is pure matching.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from kcoord.security.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)

_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


def granting_operations(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations an ALLOW may name to grant ``operation`` (ALL always does)."""
    return _IMPLIED_BY.get(operation, frozenset({operation})) | {AclOperation.ALL}


Question = tuple[str, str, AclOperation, ResourceType, str, bool]
"""What a decision answers: (principal, host, operation, resource type, resource name, whether no
applicable binding allows); the decision cache's key."""

DECISION_CACHE_SIZE = 65_536
"""Decisions remembered per matcher (a matcher lives until the ACLs change); past this the cache is
emptied, so a client naming endless resources costs memory no longer than one fill."""


class AclMatcher:
    """An immutable index of bindings: literal ones by (type, name), prefixed ones by (type, prefix)
    with the prefix lengths in use, so finding the bindings of a name costs a few dictionary lookups
    however many ACLs there are. Decisions are cached: every request asks again (each heartbeat
    checks its group), and the answer only changes when the ACLs do, which builds a new matcher."""

    def __init__(self, bindings: Iterable[AclBinding]) -> None:
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = defaultdict(list)
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = defaultdict(list)
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        self._types: set[ResourceType] = set()
        self._decisions: dict[Question, bool] = {}
        lengths: dict[ResourceType, set[int]] = defaultdict(set)
        for binding in bindings:
            self._types.add(binding.resource_type)
            key = (binding.resource_type, binding.resource_name)
            if binding.pattern_type is PatternType.PREFIXED:
                self._prefixed[key].append(binding)
                lengths[binding.resource_type].add(len(binding.resource_name))
            else:
                self._literal[key].append(binding)
        self._prefix_lengths = {kind: sorted(found) for kind, found in lengths.items()}

    def applicable(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every binding that applies to the resource, whoever it names."""
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found.extend(self._literal.get((resource_type, WILDCARD), ()))
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found.extend(self._prefixed.get((resource_type, name[:length]), ()))
        return found

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        allow_if_none: bool,
    ) -> bool:
        question = (principal, host, operation, resource_type, name, allow_if_none)
        decision = self._decisions.get(question)
        if decision is None:
            if len(self._decisions) >= DECISION_CACHE_SIZE:
                self._decisions.clear()
            decision = self._decisions[question] = self._decide(question)
        return decision

    def _decide(self, question: Question) -> bool:
        principal, host, operation, resource_type, name, allow_if_none = question
        bindings = self.applicable(resource_type, name)
        if not bindings:
            return allow_if_none
        mine = [b for b in bindings if _names(b, principal, host)]
        if any(
            b.permission is AclPermission.DENY and b.operation in (operation, AclOperation.ALL) for b in mine
        ):
            return False
        granting = granting_operations(operation)
        return any(b.permission is AclPermission.ALLOW and b.operation in granting for b in mine)

    def authorize_any(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        *,
        allow_if_none: bool,
    ) -> bool:
        """Whether the principal may do ``operation`` to at least one resource of the type (Kafka's
        ``authorizeByResourceType``): an ALLOW whose pattern no DENY of the same or a wider pattern
        covers. With no binding of the type at all, ``allow_if_none`` decides."""
        if resource_type not in self._types:
            return allow_if_none
        granting = granting_operations(operation)
        denies: list[AclBinding] = []
        allows: list[AclBinding] = []
        for binding in self._all_of(resource_type):
            if not _names(binding, principal, host):
                continue
            if binding.permission is AclPermission.DENY and binding.operation in (
                operation,
                AclOperation.ALL,
            ):
                denies.append(binding)
            elif binding.permission is AclPermission.ALLOW and binding.operation in granting:
                allows.append(binding)
        return any(not any(_covers(deny, allow) for deny in denies) for allow in allows)

    def _all_of(self, resource_type: ResourceType) -> Iterable[AclBinding]:
        for index in (self._literal, self._prefixed):
            for (kind, _name), bindings in index.items():
                if kind == resource_type:
                    yield from bindings


def _names(binding: AclBinding, principal: str, host: str) -> bool:
    """Whether the binding's entry names this principal and host (directly or by wildcard)."""
    return binding.principal in (principal, WILDCARD_PRINCIPAL) and binding.host in (host, WILDCARD)


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether every resource ``allow`` applies to is also denied by ``deny``."""
    if deny.pattern_type is PatternType.LITERAL:
        if deny.resource_name == WILDCARD:
            return True
        return allow.pattern_type is PatternType.LITERAL and allow.resource_name == deny.resource_name
    if allow.pattern_type is PatternType.LITERAL and allow.resource_name == WILDCARD:
        return False
    return allow.resource_name.startswith(deny.resource_name)
