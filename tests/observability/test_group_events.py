"""The group event observer: what the classic state machine reports becomes metrics and flag logs."""

from __future__ import annotations

import itertools
from typing import Any

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.manager import ClassicGroupManager
from kcoord.coordinator.classic.messages import LeavingMember
from kcoord.observability.group_events import GroupEventObserver
from kcoord.observability.metrics import KcoordMetrics
from tests.coordinator.classic.classic_harness import REBALANCE_MS, SESSION_MS, Harness, form_group


class RecordingLogger:
    """A structlog stand-in that keeps (event, fields) of every line."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))

    def debug(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.lines if name == event]


def observed_harness() -> tuple[Harness, KcoordMetrics, RecordingLogger]:
    h = Harness()
    metrics = KcoordMetrics()
    logger = RecordingLogger()
    counter = itertools.count()
    h.manager = ClassicGroupManager(
        h.timer,
        ClassicGroupConfig(),
        GroupEventObserver(metrics, logger),
        new_uuid=lambda: f"u{next(counter)}",
    )
    return h, metrics, logger


def sample(metrics: KcoordMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_forming_a_group_counts_one_initial_rebalance_and_logs_every_phase() -> None:
    """A new group counts one 'initial' rebalance, times each phase and logs the flag lines."""
    h, metrics, logger = observed_harness()
    form_group(h, 2)
    assert sample(metrics, "kcoord_rebalances_total", trigger="initial") == 1
    for phase in ("join", "sync", "total"):
        assert sample(metrics, "kcoord_rebalance_duration_seconds_count", phase=phase) == 1
    (preparing,) = logger.named("rebalance.preparing")
    assert preparing["group"] == "g" and preparing["generation"] == 0 and preparing["trigger"] == "initial"
    (joined,) = logger.named("rebalance.join_completed")
    assert joined["members"] == 2 and joined["removed_not_rejoined"] == []
    (assigned,) = logger.named("rebalance.assignment_received")
    assert assigned["generation"] == 1
    (stable,) = logger.named("rebalance.stable")
    assert stable["generation"] == 1 and stable["duration_ms"] >= 0


def test_late_member_is_named_removed_and_join_lasts_the_rebalance_timeout() -> None:
    """A member that does not rejoin is removed at the rebalance timeout and named in the join flag line."""
    h, metrics, logger = observed_harness()
    first, second = form_group(h, 2)
    h.heartbeat(first, 1)
    newcomer, _ = h.new_member()
    h.join(second)  # the second member rejoins; the first only heartbeats, never rejoins
    for _ in range(REBALANCE_MS // 5_000):
        h.advance(5_000)
        h.heartbeat(first, 1)
    assert sample(metrics, "kcoord_rebalances_total", trigger="member_joined") == 1
    joined = logger.named("rebalance.join_completed")[-1]
    assert joined["removed_not_rejoined"] == [first]
    assert joined["duration_ms"] == REBALANCE_MS
    removed = logger.named("member.removed")
    assert [(r["member"], r["cause"]) for r in removed] == [(first, "not_rejoined")]
    (record,) = [r for r in h.manager.rebalance_history("g") if r.trigger == "member_joined"]
    assert record.removed_not_rejoined == [first] and newcomer in record.members_after


def test_leave_and_session_expiry_log_the_member_and_its_reason() -> None:
    """LeaveGroup logs member.left with the client's reason; a silent member logs member.expired."""
    h, _, logger = observed_harness()
    first, second = form_group(h, 2)
    h.leave(LeavingMember(first, reason="shutting down"))
    (left,) = logger.named("member.left")
    assert (left["member"], left["reason"]) == (first, "shutting down")
    h.advance(SESSION_MS + 1)
    expired = logger.named("member.expired")
    assert [e["member"] for e in expired] == [second]
    reasons = [p["reasons"][0] for p in logger.named("rebalance.preparing")]
    assert any("LeaveGroup" in reason for reason in reasons)
