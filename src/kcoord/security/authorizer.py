"""What a principal may do: the authorizer every API asks, with Kafka's settings.

``authorizer.class.name`` empty (the default) means no authorizer: :class:`Authorizer` allows
everything, as Kafka without one, and the ACL APIs answer SECURITY_DISABLED. Naming one
(``kcoord.security.StandardAuthorizer``, or Kafka's ``StandardAuthorizer``/``AclAuthorizer``
class names, so a Kafka configuration carries over) turns on :class:`AclAuthorizer`:
``super.users`` may do anything, and without an applicable ACL nothing is allowed unless
``allow.everyone.if.no.acl.found=true``.

In cluster mode the ACLs are the cluster's (one document in PostgreSQL, polled by every node; see
:mod:`kcoord.cluster.shared_state`). A node whose last successful poll is older than
``kcoord.cluster.state.max.staleness.ms`` does not decide with the ACLs it last saw: every decision
that would consult them raises REQUEST_TIMED_OUT instead. Kafka's StandardAuthorizer refuses in the
same spot (not ready, before it has caught up with the metadata log) with a retriable exception;
REQUEST_TIMED_OUT is the retriable code every API's clients know and retry, and it says what
happened (the node timed out learning the cluster's ACLs), where COORDINATOR_NOT_AVAILABLE or
NOT_CONTROLLER would be wrong for most APIs. Super users are configuration, not ACLs: they are
still answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence

import structlog

from kcoord.config import Settings
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.acl import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourceType,
)
from kcoord.security.acl_matcher import AclMatcher
from kcoord.security.acl_store import AclStore
from kcoord.security.principal import KafkaPrincipal
from kcoord.storage.documents import Freshness

log = structlog.get_logger(__name__)


def operations_bits(operations: Sequence[AclOperation]) -> int:
    """Kafka's ``authorized_operations`` field: bit ``op.value`` set per operation."""
    bits = 0
    for operation in operations:
        bits |= 1 << operation.value
    return bits


class Authorizer:
    """No authorizer configured: every principal may do everything."""

    enabled = False

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        return True

    def authorize_any(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may do ``operation`` to some resource of the type."""
        return True

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The bit set of the type's operations the principal may do to the resource."""
        allowed = [
            op
            for op in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(principal, host, op, resource_type, name)
        ]
        return operations_bits(allowed)

    def decision_key(self, principal: KafkaPrincipal, host: str) -> Hashable:
        """What every decision for ``principal`` from ``host`` depends on, as of now.

        Two requests with equal keys get the same answer to every question about every resource,
        so an answer built from one's decisions can be served to the other (the all-topics
        Metadata cache). The key changes whenever the ACLs do.
        """
        return None


_UNNAMED = "<unnamed>"
"""A principal or host no ACL names: its decisions are those of the wildcard entries alone."""


class AclAuthorizer(Authorizer):
    """Decides on the node's ACLs; changes are persisted before they are acknowledged and apply
    from the next request on."""

    enabled = True

    def __init__(
        self,
        store: AclStore,
        *,
        super_users: Sequence[str],
        allow_if_no_acl: bool,
        freshness: Freshness | None = None,
    ) -> None:
        self._store = store
        self._freshness = freshness or Freshness.always()
        self._super_users = frozenset(super_users)
        self._allow_if_no_acl = allow_if_no_acl
        self._bindings: tuple[AclBinding, ...] = ()
        self._matcher = AclMatcher(())
        self._changes = asyncio.Lock()
        self._version = 0
        self._named_principals: frozenset[str] = frozenset()
        self._named_hosts: frozenset[str] = frozenset()

    async def load(self) -> None:
        self._set(await self._store.refresh() or [])
        log.info("acls.loaded", count=len(self._bindings), location=self._store.location)

    async def refresh(self) -> None:
        """Take the ACLs as stored now, when they changed (another node's change, in a cluster)."""
        bindings = await self._store.refresh()
        if bindings is not None and set(bindings) != set(self._bindings):
            async with self._changes:
                self._set(bindings)
            log.info("acls.refreshed", count=len(bindings), location=self._store.location)

    def _check_fresh(self) -> None:
        if not self._freshness.fresh():
            age = self._freshness.age_s()
            raise KafkaError(
                ErrorCode.request_timed_out,
                "this node could not read the cluster's ACLs for "
                f"{'ever' if age is None else f'{age:.1f} s'}; retry",
            )

    @property
    def bindings(self) -> tuple[AclBinding, ...]:
        return self._bindings

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        text = str(principal)
        if text in self._super_users:
            return True
        self._check_fresh()
        return self._matcher.authorize(
            text, host, operation, resource_type, name, allow_if_none=self._allow_if_no_acl
        )

    def authorize_any(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        text = str(principal)
        if text in self._super_users:
            return True
        self._check_fresh()
        return self._matcher.authorize_any(
            text, host, operation, resource_type, allow_if_none=self._allow_if_no_acl
        )

    def decision_key(self, principal: KafkaPrincipal, host: str) -> Hashable:
        """The ACLs' version, the principal and the host; a principal or host that no ACL names
        only meets wildcard entries, so all such share one key (as do the super users)."""
        text = str(principal)
        if text in self._super_users:
            return (self._version, "<super user>")
        self._check_fresh()
        return (
            self._version,
            text if text in self._named_principals else _UNNAMED,
            host if host in self._named_hosts else _UNNAMED,
        )

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._bindings if acl_filter.matches(b)]

    async def create(self, bindings: Sequence[AclBinding]) -> None:
        """Adds the (validated) bindings; one already present is not added twice."""

        def add(current: list[AclBinding]) -> list[AclBinding]:
            present = set(current)
            for binding in bindings:
                if binding not in present:
                    present.add(binding)
                    current.append(binding)
            return current

        async with self._changes:
            self._set(await self._store.update(add))
        log.info("acls.created", acls=[_describe(b) for b in bindings])

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Removes every binding a filter matches; returns, per filter, the bindings it matched."""
        matched: list[list[AclBinding]] = []

        def remove(current: list[AclBinding]) -> list[AclBinding]:
            matched[:] = [[b for b in current if f.matches(b)] for f in filters]
            gone = {b for bindings in matched for b in bindings}
            return [b for b in current if b not in gone]

        async with self._changes:
            self._set(await self._store.update(remove))
        gone = {b for bindings in matched for b in bindings}
        if gone:
            log.info("acls.deleted", acls=[_describe(b) for b in gone])
        return matched

    def _set(self, bindings: Sequence[AclBinding]) -> None:
        self._bindings = tuple(bindings)
        self._matcher = AclMatcher(self._bindings)
        self._named_principals = frozenset(b.principal for b in self._bindings)
        self._named_hosts = frozenset(b.host for b in self._bindings)
        self._version += 1


def _describe(binding: AclBinding) -> str:
    return (
        f"{binding.principal}@{binding.host} {binding.permission.name} {binding.operation.name} "
        f"{binding.resource_type.name}:{binding.pattern_type.name}:{binding.resource_name}"
    )


def build_authorizer(settings: Settings, store: AclStore, freshness: Freshness | None = None) -> Authorizer:
    """The authorizer ``authorizer.class.name`` asks for (validated when the settings were read),
    deciding on the ACLs of ``store``."""
    if not settings["authorizer.class.name"]:
        return Authorizer()
    return AclAuthorizer(
        store,
        super_users=settings["super.users"],
        allow_if_no_acl=settings["allow.everyone.if.no.acl.found"],
        freshness=freshness,
    )
