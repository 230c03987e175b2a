"""The initial delay as a quiet period: one rebalance, one delay after the last newcomer."""

from __future__ import annotations

from classic_harness import Harness

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.protocol.errors import ErrorCode

DELAY_MS = 300


def _harness() -> Harness:
    return Harness(ClassicGroupConfig(initial_rebalance_delay_ms=DELAY_MS))


def _advance_until_answered(h: Harness, sinks: list[str], step_ms: int = 10, limit_ms: int = 60_000) -> int:
    start = h.now
    while any(sink not in h.answers for sink in sinks):
        assert h.now - start < limit_ms, "join phase never completed"
        h.advance(step_ms)
    return h.now


def test_members_starting_together_wait_one_delay_after_the_last() -> None:
    """Ten members arriving within 50 ms form one generation 300 ms after the last, not 600 ms."""
    h = _harness()
    sinks = []
    for _ in range(10):
        _, sink = h.new_member()
        sinks.append(sink)
        h.advance(5)
    last_arrival = h.now - 5
    completed = _advance_until_answered(h, sinks)
    assert last_arrival + DELAY_MS <= completed <= last_arrival + DELAY_MS + 10
    assert {h.answers[s].generation_id for s in sinks} == {1}
    assert all(h.answers[s].error_code is ErrorCode.none for s in sinks)


def test_a_lone_member_waits_exactly_the_delay() -> None:
    """With nobody else arriving, the first member's join completes after one delay."""
    h = _harness()
    _, sink = h.new_member()
    assert _advance_until_answered(h, [sink]) == DELAY_MS


def test_a_steady_stream_of_newcomers_is_cut_off_at_the_rebalance_timeout() -> None:
    """Newcomers every 200 ms keep the group waiting, but never past the rebalance timeout."""
    h = _harness()
    sinks = []
    rebalance_ms = 2_000
    for _ in range(30):
        if sinks and all(s in h.answers for s in sinks):
            break
        _, sink = h.new_member(rebalance_ms=rebalance_ms)
        sinks.append(sink)
        h.advance(200)
    answered = [s for s in sinks if s in h.answers]
    assert answered, "the join phase must end by the rebalance timeout"
    assert h.now <= rebalance_ms + 200
