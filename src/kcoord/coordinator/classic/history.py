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
from typing import Protocol, runtime_checkable

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


@runtime_checkable
class RebalanceEventObserver(Protocol):
    """Finer rebalance events for flag logs; an observer may implement these too (all optional).

    Kept apart from :class:`ClassicGroupObserver` so an observer of transitions alone still fits.
    """

    def on_rebalance_started(self, group_id: str, rebalance: RebalanceRecord) -> None: ...

    def on_join_completed(self, group_id: str, rebalance: RebalanceRecord) -> None: ...

    def on_assignment_received(self, group_id: str, leader_id: str, generation_id: int, now_ms: int) -> None:
        """The leader's SyncGroup brought the assignment of ``generation_id``."""

    def on_member_removed(self, group_id: str, member_id: str, cause: str, reason: str, now_ms: int) -> None:
        """``cause``: ``session_expired``, ``left``, ``not_rejoined`` or ``not_synced``."""


@runtime_checkable
class GroupConversionObserver(Protocol):
    """Told when a group changes kind (optional, as :class:`RebalanceEventObserver`)."""

    def on_group_converted(self, group_id: str, into: str, generation: int, members: int) -> None:
        """``into``: ``"consumer"`` (an online upgrade) or ``"classic"`` (a downgrade)."""


class NullObserver:
    """The default observer: ignores everything."""

    def on_group_converted(self, group_id: str, into: str, generation: int, members: int) -> None:
        return None

    def on_rebalance_started(self, group_id: str, rebalance: RebalanceRecord) -> None:
        return None

    def on_join_completed(self, group_id: str, rebalance: RebalanceRecord) -> None:
        return None

    def on_assignment_received(self, group_id: str, leader_id: str, generation_id: int, now_ms: int) -> None:
        return None

    def on_member_removed(self, group_id: str, member_id: str, cause: str, reason: str, now_ms: int) -> None:
        return None

    def on_state_change(
        self, group_id: str, old: ClassicGroupState, new: ClassicGroupState, now_ms: int
    ) -> None:
        return None

    def on_rebalance_finished(self, group_id: str, rebalance: RebalanceRecord) -> None:
        return None


def rebalance_events(observer: ClassicGroupObserver) -> RebalanceEventObserver:
    """``observer`` itself when it takes the finer events, else an observer that ignores them."""
    return observer if isinstance(observer, RebalanceEventObserver) else NullObserver()


def conversion_events(observer: ClassicGroupObserver | None) -> GroupConversionObserver:
    """``observer`` itself when it is told of conversions, else an observer that ignores them."""
    return observer if isinstance(observer, GroupConversionObserver) else NullObserver()


def new_history() -> deque[RebalanceRecord]:
    return deque(maxlen=HISTORY_LENGTH)
