"""What the classic groups report, turned into rebalance metrics and flag log lines.

One :class:`GroupEventObserver` is handed to every coordinator shard. It implements
:class:`~kcoord.coordinator.classic.history.ClassicGroupObserver` and
:class:`~kcoord.coordinator.classic.history.RebalanceEventObserver` and
:class:`~kcoord.coordinator.classic.history.GroupConversionObserver`; every call happens on the
shard's runner (the event loop), so nothing here needs a lock. The flag lines are the ones an
operator greps for when a group misbehaves:

- ``rebalance.preparing``: group, old generation, trigger, reasons;
- ``rebalance.join_completed``: join phase duration, members, who was removed for not rejoining;
- ``rebalance.assignment_received``: the leader's SyncGroup arrived;
- ``rebalance.stable``: the whole rebalance's duration and the new generation;
- ``member.expired``, ``member.left`` (with the client's reason), ``member.removed`` (not
  rejoined or not synced in time);
- ``group_upgraded``, ``group_downgraded``: a group changed kind (classic to consumer or back).
"""

from __future__ import annotations

from typing import Any

import structlog

from kcoord.coordinator.classic.history import RebalanceRecord
from kcoord.coordinator.classic.state import ClassicGroupState
from kcoord.observability.metrics import KcoordMetrics

log = structlog.get_logger("kcoord.groups")

_MEMBER_EVENTS = {"session_expired": "member.expired", "left": "member.left"}


class GroupEventObserver:
    def __init__(self, metrics: KcoordMetrics, logger: Any = None) -> None:
        self._metrics = metrics
        self._log = logger if logger is not None else log

    # -- ClassicGroupObserver ----------------------------------------------------------------

    def on_state_change(
        self, group_id: str, old: ClassicGroupState, new: ClassicGroupState, now_ms: int
    ) -> None:
        self._log.debug("group.state_changed", group=group_id, old=str(old), new=str(new))

    def on_rebalance_finished(self, group_id: str, rebalance: RebalanceRecord) -> None:
        if rebalance.completed_ms is None:
            return
        total_ms = rebalance.completed_ms - rebalance.started_ms
        if rebalance.outcome in ("stable", "empty"):
            self._metrics.rebalance_duration.labels("total").observe(total_ms / 1000)
        if rebalance.outcome == "stable" and rebalance.join_completed_ms is not None:
            sync_ms = rebalance.completed_ms - rebalance.join_completed_ms
            self._metrics.rebalance_duration.labels("sync").observe(sync_ms / 1000)
            self._log_phase_end("rebalance.stable", group_id, rebalance, total_ms, sync_ms=sync_ms)
        elif rebalance.outcome != "stable":
            self._log.info(
                "rebalance.ended",
                group=group_id,
                outcome=rebalance.outcome,
                generation=rebalance.generation_after,
                duration_ms=total_ms,
            )

    def _log_phase_end(
        self, event: str, group_id: str, rebalance: RebalanceRecord, duration_ms: int, **details: Any
    ) -> None:
        """A rebalance reached a stage: its new generation and members, how long it took, and more."""
        self._log.info(
            event,
            group=group_id,
            generation=rebalance.generation_after,
            duration_ms=duration_ms,
            members=len(rebalance.members_after),
            **details,
        )

    # -- RebalanceEventObserver --------------------------------------------------------------

    def on_rebalance_started(self, group_id: str, rebalance: RebalanceRecord) -> None:
        self._metrics.rebalances.labels(rebalance.trigger).inc()
        self._log.info(
            "rebalance.preparing",
            group=group_id,
            generation=rebalance.generation_before,
            trigger=rebalance.trigger,
            reasons=[rebalance.reason, *rebalance.client_reasons],
            members=len(rebalance.members_before),
        )

    def on_join_completed(self, group_id: str, rebalance: RebalanceRecord) -> None:
        if rebalance.join_completed_ms is None:
            return
        join_ms = rebalance.join_completed_ms - rebalance.started_ms
        self._metrics.rebalance_duration.labels("join").observe(join_ms / 1000)
        self._log_phase_end(
            "rebalance.join_completed",
            group_id,
            rebalance,
            join_ms,
            removed_not_rejoined=list(rebalance.removed_not_rejoined),
        )

    def on_assignment_received(self, group_id: str, leader_id: str, generation_id: int, now_ms: int) -> None:
        self._log.info(
            "rebalance.assignment_received", group=group_id, generation=generation_id, leader=leader_id
        )

    def on_member_removed(self, group_id: str, member_id: str, cause: str, reason: str, now_ms: int) -> None:
        event = _MEMBER_EVENTS.get(cause, "member.removed")
        self._log.info(event, group=group_id, member=member_id, cause=cause, reason=reason)

    # -- GroupConversionObserver -------------------------------------------------------------

    def on_group_converted(self, group_id: str, into: str, generation: int, members: int) -> None:
        event = "group_upgraded" if into == "consumer" else "group_downgraded"
        self._log.info(event, group=group_id, generation=generation, members=members)
