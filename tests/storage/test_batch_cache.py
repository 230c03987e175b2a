"""The PostgreSQL engine's batch cache: a byte budget, least recently used first, cold entries first."""

from __future__ import annotations

from kcoord.storage.postgres.batch_cache import BatchCache


def test_the_least_recently_used_batch_goes_first() -> None:
    """Over budget, the entry read or written longest ago is evicted; a read refreshes an entry."""
    cache = BatchCache(30)
    cache.put(1, 0, b"a" * 10)
    cache.put(1, 10, b"b" * 10)
    cache.put(1, 20, b"c" * 10)
    assert cache.get(1, 0) == b"a" * 10
    cache.put(2, 0, b"d" * 10)
    assert cache.get(1, 10) is None
    assert [cache.get(1, 0), cache.get(1, 20), cache.get(2, 0)] == [b"a" * 10, b"c" * 10, b"d" * 10]
    assert cache.size == 30 and len(cache) == 3


def test_cold_entries_go_before_hot_ones() -> None:
    """A batch read back from the database is the next to go, so a catching-up reader keeps the tail."""
    cache = BatchCache(20)
    cache.put(1, 0, b"t" * 10)
    cache.put(1, 10, b"u" * 10)
    cache.put(9, 0, b"c" * 10, hot=False)
    assert cache.get(9, 0) is None
    assert cache.get(1, 0) is not None and cache.get(1, 10) is not None


def test_a_batch_larger_than_the_budget_is_not_kept() -> None:
    """A zero budget keeps nothing; a batch over the budget never evicts the others."""
    cache = BatchCache(10)
    cache.put(1, 0, b"a" * 5)
    cache.put(1, 5, b"b" * 11)
    assert cache.get(1, 0) == b"a" * 5 and cache.get(1, 5) is None
    empty = BatchCache(0)
    empty.put(1, 0, b"a")
    assert len(empty) == 0 and empty.size == 0


def test_dropping_a_segment_frees_its_batches_from_a_position_on() -> None:
    """Truncation drops a segment's batches past the cut; deletion drops them all."""
    cache = BatchCache(100)
    for position in (0, 10, 20):
        cache.put(1, position, b"x" * 10)
    cache.put(2, 0, b"y" * 10)
    cache.drop_segment(1, 10)
    assert [cache.get(1, p) is not None for p in (0, 10, 20)] == [True, False, False]
    cache.drop_segment(1)
    cache.drop_segment(3)
    assert cache.size == 10 and len(cache) == 1 and cache.get(2, 0) == b"y" * 10
