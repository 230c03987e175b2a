"""Pure decisions of the ACL matcher and the authorizer's super users, as Kafka's authorizers decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcoord.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from kcoord.security.acl_matcher import AclMatcher
from kcoord.security.acl_store import AclStore, acl_file
from kcoord.security.authorizer import AclAuthorizer, Authorizer
from kcoord.security.principal import KafkaPrincipal

Op = AclOperation
ALLOW, DENY = AclPermission.ALLOW, AclPermission.DENY
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(
    name: str,
    op: AclOperation,
    permission: AclPermission = ALLOW,
    *,
    kind: ResourceType = TOPIC,
    pattern: PatternType = LIT,
    principal: str = "User:alice",
    host: str = "*",
) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, op, permission)


def decide(
    bindings: list[AclBinding],
    op: AclOperation,
    name: str,
    *,
    principal: str = "User:alice",
    host: str = "10.0.0.1",
    kind: ResourceType = TOPIC,
    allow_if_none: bool = False,
) -> bool:
    return AclMatcher(bindings).authorize(principal, host, op, kind, name, allow_if_none=allow_if_none)


def test_nothing_applies_follows_allow_everyone_if_no_acl_found() -> None:
    """Without an applicable ACL the answer is allow.everyone.if.no.acl.found."""
    others = [acl("other", Op.READ)]
    assert decide(others, Op.READ, "orders") is False
    assert decide(others, Op.READ, "orders", allow_if_none=True) is True


def test_an_acl_for_someone_else_makes_the_resource_closed_even_with_allow_if_none() -> None:
    """Once any ACL applies to a resource, allow.everyone.if.no.acl.found no longer opens it."""
    assert (
        decide([acl("orders", Op.READ, principal="User:bob")], Op.READ, "orders", allow_if_none=True) is False
    )


def test_literal_wildcard_and_prefixed_patterns_apply() -> None:
    """A literal name, the literal * and a prefix of the name all apply; a longer prefix does not."""
    assert decide([acl("orders", Op.READ)], Op.READ, "orders")
    assert not decide([acl("orders", Op.READ)], Op.READ, "orders-eu")
    assert decide([acl("*", Op.READ)], Op.READ, "anything")
    assert decide([acl("ord", Op.READ, pattern=PRE)], Op.READ, "orders")
    assert not decide([acl("orders-eu", Op.READ, pattern=PRE)], Op.READ, "orders")


def test_deny_wins_over_allow() -> None:
    """A matching DENY beats any ALLOW, also a DENY of ALL through a prefix."""
    assert not decide([acl("orders", Op.READ), acl("orders", Op.READ, DENY)], Op.READ, "orders")
    assert not decide([acl("*", Op.ALL), acl("ord", Op.ALL, DENY, pattern=PRE)], Op.WRITE, "orders")


def test_describe_is_implied_by_read_write_delete_alter_and_describe_configs_by_alter_configs() -> None:
    """Kafka's implications: DESCRIBE from READ/WRITE/DELETE/ALTER, DESCRIBE_CONFIGS from ALTER_CONFIGS."""
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL):
        assert decide([acl("t", op)], Op.DESCRIBE, "t"), op
    assert not decide([acl("t", Op.CREATE)], Op.DESCRIBE, "t")
    assert decide([acl("t", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, "t")
    assert not decide([acl("t", Op.DESCRIBE)], Op.READ, "t")


def test_deny_of_read_does_not_deny_describe() -> None:
    """A DENY names its operation only (or ALL): DESCRIBE granted by WRITE survives a DENY of READ."""
    assert decide([acl("t", Op.WRITE), acl("t", Op.READ, DENY)], Op.DESCRIBE, "t")


def test_principal_and_host_match_exactly_or_by_wildcard() -> None:
    """An entry names the principal or User:*, and the host or *."""
    assert decide([acl("t", Op.READ, principal="User:*")], Op.READ, "t", principal="User:ANONYMOUS")
    assert not decide([acl("t", Op.READ, principal="User:bob")], Op.READ, "t")
    assert decide([acl("t", Op.READ, host="10.0.0.1")], Op.READ, "t", host="10.0.0.1")
    assert not decide([acl("t", Op.READ, host="10.0.0.2")], Op.READ, "t", host="10.0.0.1")


def test_resource_types_are_separate() -> None:
    """A topic ACL says nothing about a group of the same name."""
    assert not decide([acl("x", Op.READ)], Op.READ, "x", kind=GROUP)
    assert decide([acl("x", Op.READ, kind=GROUP)], Op.READ, "x", kind=GROUP)


def test_authorize_any_needs_an_allow_no_deny_covers() -> None:
    """By resource type: an undenied ALLOW grants; a DENY of the same or a wider pattern does not."""
    m = AclMatcher([acl("a", Op.WRITE), acl("a", Op.WRITE, DENY)])
    assert not m.authorize_any("User:alice", "h", Op.WRITE, TOPIC, allow_if_none=False)
    m = AclMatcher([acl("a", Op.WRITE), acl("b", Op.WRITE, DENY)])
    assert m.authorize_any("User:alice", "h", Op.WRITE, TOPIC, allow_if_none=False)
    m = AclMatcher([acl("app-1", Op.WRITE, pattern=PRE), acl("app", Op.ALL, DENY, pattern=PRE)])
    assert not m.authorize_any("User:alice", "h", Op.WRITE, TOPIC, allow_if_none=False)
    assert not AclMatcher([]).authorize_any("User:alice", "h", Op.WRITE, TOPIC, allow_if_none=False)
    assert AclMatcher([]).authorize_any("User:alice", "h", Op.WRITE, TOPIC, allow_if_none=True)


def test_filters_select_as_describe_and_delete_acls_do() -> None:
    """ANY matches every value; MATCH selects the bindings that apply to the named resource."""
    bindings = [
        acl("orders", Op.READ),
        acl("ord", Op.READ, pattern=PRE),
        acl("*", Op.WRITE),
        acl("x", Op.READ),
    ]
    any_filter = AclBindingFilter(
        ResourceType.ANY, None, PatternType.ANY, None, None, Op.ANY, AclPermission.ANY
    )
    assert [b for b in bindings if any_filter.matches(b)] == bindings
    match = AclBindingFilter(TOPIC, "orders", PatternType.MATCH, None, None, Op.ANY, AclPermission.ANY)
    assert [b for b in bindings if match.matches(b)] == bindings[:3]
    literal = AclBindingFilter(TOPIC, "ord", LIT, None, None, Op.ANY, AclPermission.ANY)
    assert [b for b in bindings if literal.matches(b)] == []
    reads = AclBindingFilter(TOPIC, None, PatternType.ANY, "User:alice", None, Op.READ, ALLOW)
    assert [b for b in bindings if reads.matches(b)] == [bindings[0], bindings[1], bindings[3]]


def test_bindings_that_cannot_be_stored_are_refused() -> None:
    """ANY/MATCH/UNKNOWN values, a principal without a type and a misnamed cluster are invalid."""
    with pytest.raises(ValueError):
        AclBinding(TOPIC, "t", PatternType.MATCH, "User:a", "*", Op.READ, ALLOW).validate()
    with pytest.raises(ValueError):
        AclBinding(TOPIC, "t", LIT, "alice", "*", Op.READ, ALLOW).validate()
    with pytest.raises(ValueError):
        AclBinding(ResourceType.CLUSTER, "c", LIT, "User:a", "*", Op.ALTER, ALLOW).validate()
    with pytest.raises(ValueError):
        AclBinding(TOPIC, "t", LIT, "User:a", "*", Op.ANY, ALLOW).validate()


def test_no_authorizer_allows_everything_and_reports_every_operation() -> None:
    """Without authorizer.class.name every request is allowed and authorized_operations has every bit."""
    auth = Authorizer()
    anon = KafkaPrincipal.user("ANONYMOUS")
    assert auth.authorize(anon, "h", Op.DELETE, TOPIC, "t")
    assert auth.authorized_operations(anon, "h", GROUP, "g") == (1 << 3) | (1 << 8) | (1 << 6)


async def test_super_users_may_do_anything_and_changes_persist(tmp_path: Path) -> None:
    """Super users bypass ACLs (even a DENY); created ACLs apply at once, reload from disk, and delete."""
    auth = AclAuthorizer(AclStore(acl_file(tmp_path)), super_users=["User:admin"], allow_if_no_acl=False)
    await auth.load()
    admin, alice = KafkaPrincipal.user("admin"), KafkaPrincipal.user("alice")
    await auth.create([acl("t", Op.ALL, DENY, principal="User:*")])
    assert auth.authorize(admin, "h", Op.DELETE, TOPIC, "t")
    assert not auth.authorize(alice, "h", Op.READ, TOPIC, "t")
    await auth.create([acl("g", Op.READ, kind=GROUP), acl("g", Op.READ, kind=GROUP)])
    assert auth.authorize(alice, "h", Op.READ, GROUP, "g")
    assert auth.authorized_operations(alice, "h", GROUP, "g") == (1 << 3) | (1 << 8)

    reloaded = AclAuthorizer(AclStore(acl_file(tmp_path)), super_users=[], allow_if_no_acl=False)
    await reloaded.load()
    assert reloaded.bindings == auth.bindings
    assert len(reloaded.bindings) == 2

    group_filter = AclBindingFilter(GROUP, None, PatternType.ANY, None, None, Op.ANY, AclPermission.ANY)
    matched = await reloaded.delete([group_filter])
    assert matched == [[acl("g", Op.READ, kind=GROUP)]]
    assert not reloaded.authorize(alice, "h", Op.READ, GROUP, "g")
    again = AclAuthorizer(AclStore(acl_file(tmp_path)), super_users=[], allow_if_no_acl=False)
    await again.load()
    assert again.bindings == (acl("t", Op.ALL, DENY, principal="User:*"),)
