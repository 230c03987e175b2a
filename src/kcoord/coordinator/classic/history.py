"""A small record of each rebalance, kept per group for observability.

The state machine fills one :class:`RebalanceRecord` per rebalance: what started it, the
reasons clients gave, when the join and sync phases ended, who was in the group before and
after, and who was dropped for not rejoining or not syncing. Only the last
:data:`HISTORY_LENGTH` are kept. An optional :class:`ClassicGroupObserver` is told about state
transitions and finished rebalances, so the shell can export metrics without the core knowing
about Prometheus.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from kcoord.coordinator.classic.state import ClassicGroupState

HISTORY_LENGTH = 32


@dataclass(slots=True)
class RebalanceRecord:
    """One rebalance; ``outcome`` stays ``"in_progress"`` until it ends."""

    trigger: str
    reason: str
    started_ms: int
    generation_before: int
    members_before: tuple[str, ...]
    client_reasons: list[str] = field(default_factory=list)
    join_completed_ms: int | None = None
    completed_ms: int | None = None
    generation_after: int | None = None
    members_after: tuple[str, ...] = ()
    removed_not_rejoined: list[str] = field(default_factory=list)
    removed_not_synced: list[str] = field(default_factory=list)
    outcome: str = "in_progress"


class ClassicGroupObserver(Protocol):
    """What the shell may learn from the classic groups (all calls happen on the shard's runner)."""

    def on_state_change(
        self, group_id: str, old: ClassicGroupState, new: ClassicGroupState, now_ms: int
    ) -> None: ...

    def on_rebalance_finished(self, group_id: str, rebalance: RebalanceRecord) -> None: ...


class NullObserver:
    """The default observer: ignores everything."""

    def on_state_change(
        self, group_id: str, old: ClassicGroupState, new: ClassicGroupState, now_ms: int
    ) -> None:
        return None

    def on_rebalance_finished(self, group_id: str, rebalance: RebalanceRecord) -> None:
        return None


def new_history() -> deque[RebalanceRecord]:
    return deque(maxlen=HISTORY_LENGTH)
