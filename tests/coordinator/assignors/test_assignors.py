"""The server assignors: balance, stickiness and co-partitioning."""

from __future__ import annotations

import itertools

import pytest

from kcoord.coordinator.assignors import (
    Assignment,
    AssignmentSpec,
    MemberSpec,
    PartitionAssignor,
    RangeAssignor,
    UniformAssignor,
)


def _spec(
    members: dict[str, Assignment], topics: dict[str, int], sub: frozenset[str] | None = None
) -> AssignmentSpec:
    subscribed = sub if sub is not None else frozenset(topics)
    return AssignmentSpec(
        members={m: MemberSpec(subscribed, current) for m, current in members.items()},
        partitions_per_topic=topics,
    )


def _pairs(assignment: Assignment) -> set[tuple[str, int]]:
    return {(t, p) for t, parts in assignment.items() for p in parts}


def _check_complete_and_disjoint(result: dict[str, Assignment], topics: dict[str, int]) -> None:
    seen: list[tuple[str, int]] = [tp for a in result.values() for tp in _pairs(a)]
    assert len(seen) == len(set(seen)), "a partition is assigned twice"
    assert set(seen) == {(t, p) for t, n in topics.items() for p in range(n)}


@pytest.mark.parametrize("assignor", [UniformAssignor(), RangeAssignor()], ids=lambda a: a.name)
@pytest.mark.parametrize(("members", "partitions"), [(1, 1), (3, 6), (4, 6), (10, 30), (7, 3)])
def test_balanced_with_one_subscription(assignor: PartitionAssignor, members: int, partitions: int) -> None:
    """Every partition goes to exactly one member and member sizes differ by at most one."""
    topics = {"orders": partitions}
    result = assignor.assign(_spec({f"m{i}": {} for i in range(members)}, topics))
    _check_complete_and_disjoint(result, topics)
    sizes = [len(_pairs(a)) for a in result.values()]
    assert max(sizes) - min(sizes) <= 1


def test_uniform_join_moves_only_what_the_newcomer_needs() -> None:
    """3 members on 6 partitions plus one joining: exactly one partition moves, to the newcomer."""
    uniform = UniformAssignor()
    topics = {"orders": 6}
    first = uniform.assign(_spec({"b": {}, "c": {}, "d": {}}, topics))
    second = uniform.assign(_spec({**first, "a": {}}, topics))
    _check_complete_and_disjoint(second, topics)
    moved = sum(len(_pairs(first[m]) - _pairs(second[m])) for m in first)
    assert moved == 1
    assert len(_pairs(second["a"])) == 1


def test_uniform_leave_moves_only_the_leavers_partitions() -> None:
    """When a member leaves, the others keep everything they held."""
    uniform = UniformAssignor()
    topics = {"orders": 30, "payments": 7}
    members = {f"m{i}": {} for i in range(10)}
    first = uniform.assign(_spec(members, topics))
    remaining = {m: a for m, a in first.items() if m != "m3"}
    second = uniform.assign(_spec(remaining, topics))
    _check_complete_and_disjoint(second, topics)
    for member, before in remaining.items():
        assert _pairs(before) <= _pairs(second[member])


def test_uniform_balances_different_subscriptions() -> None:
    """A member subscribed to two topics takes the load the one-topic members cannot share."""
    spec = AssignmentSpec(
        members={
            "a": MemberSpec(frozenset({"x"})),
            "b": MemberSpec(frozenset({"x", "y"})),
            "c": MemberSpec(frozenset({"y"})),
        },
        partitions_per_topic={"x": 3, "y": 3},
    )
    result = UniformAssignor().assign(spec)
    _check_complete_and_disjoint(result, {"x": 3, "y": 3})
    assert sorted(len(_pairs(a)) for a in result.values()) == [2, 2, 2]
    assert "y" not in result["a"] and "x" not in result["c"]


def test_uniform_ignores_missing_and_unsubscribed_topics() -> None:
    """Partitions of deleted topics are dropped from the members' holdings."""
    spec = _spec({"a": {"gone": frozenset({0})}, "b": {}}, {"orders": 2})
    result = UniformAssignor().assign(spec)
    assert {tp for a in result.values() for tp in _pairs(a)} == {("orders", 0), ("orders", 1)}


def test_range_co_partitions_topics() -> None:
    """Range gives each member the same partition numbers of every topic."""
    topics = {"x": 4, "y": 4}
    result = RangeAssignor().assign(_spec({"a": {}, "b": {}}, topics))
    assert result["a"] == {"x": frozenset({0, 1}), "y": frozenset({0, 1})}
    assert result["b"] == {"x": frozenset({2, 3}), "y": frozenset({2, 3})}


def test_uniform_is_deterministic() -> None:
    """The same input gives the same output whatever the order of the members."""
    topics = {"orders": 11}
    names = ["c", "a", "d", "b"]
    results = [
        UniformAssignor().assign(_spec({m: {} for m in order}, topics))
        for order in itertools.islice(itertools.permutations(names), 5)
    ]
    assert all(r == results[0] for r in results)
