"""The share assignor: every subscribed member gets partitions; one partition may go to several members."""

from __future__ import annotations

import uuid

from kcoord.coordinator.share.assignor import assign_share_partitions

A, B = uuid.UUID(int=10), uuid.UUID(int=11)


def test_more_members_than_partitions_share_them() -> None:
    """Three members on a one-partition topic all read partition 0."""
    assignment = assign_share_partitions({"m1": ("a",), "m2": ("a",), "m3": ("a",)}, {"a": (A, 1)})
    assert assignment == dict.fromkeys(("m1", "m2", "m3"), ((A, (0,)),))


def test_members_and_partitions_are_balanced() -> None:
    """Five members on two partitions: 3 and 2 readers; two members on five partitions: 3 and 2 partitions."""
    five = assign_share_partitions({f"m{i}": ("a",) for i in range(5)}, {"a": (A, 2)})
    readers = [sum(1 for parts in five.values() if parts[0][1] == (p,)) for p in (0, 1)]
    assert readers == [3, 2]
    two = assign_share_partitions({"x": ("a",), "y": ("a",)}, {"a": (A, 5)})
    assert two == {"x": ((A, (0, 2, 4)),), "y": ((A, (1, 3)),)}


def test_each_topic_goes_to_its_own_subscribers_and_missing_topics_are_skipped() -> None:
    """Heterogeneous subscriptions: a topic reaches only its subscribers; unknown topics give nothing."""
    assignment = assign_share_partitions(
        {"m1": ("a", "b"), "m2": ("b",), "m3": ("gone",)}, {"a": (A, 2), "b": (B, 1)}
    )
    assert assignment["m1"] == tuple(sorted(((A, (0, 1)), (B, (0,)))))
    assert assignment["m2"] == ((B, (0,)),)
    assert assignment["m3"] == ()
