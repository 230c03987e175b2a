"""The deterministic spread of partitions over live nodes."""

from __future__ import annotations

from collections import Counter

from kcoord.cluster.assignment import assign


def test_every_topic_is_spread_within_one_partition_of_even() -> None:
    """50 offsets partitions and a 7-partition topic over 3 nodes: each node within one of even per topic."""
    partitions = [("__consumer_offsets", p) for p in range(50)] + [("orders", p) for p in range(7)]
    owners = assign(partitions, [3, 1, 2])
    for topic, count in (("__consumer_offsets", 50), ("orders", 7)):
        load = Counter(node for (t, _), node in owners.items() if t == topic)
        assert set(load) == {1, 2, 3}
        assert max(load.values()) - min(load.values()) <= 1 and sum(load.values()) == count


def test_the_answer_depends_only_on_the_live_set() -> None:
    """The order nodes are listed in does not matter; no node means no owner; one node owns all."""
    partitions = [("t", p) for p in range(10)]
    assert assign(partitions, [2, 1, 3]) == assign(partitions, [3, 2, 1])
    assert assign(partitions, []) == {}
    assert set(assign(partitions, [5]).values()) == {5}
