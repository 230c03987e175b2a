"""The last epoch bumps of a consumer group: why each happened and how long reconciling took.

The KIP-848 counterpart of the classic rebalance history. Each bump of the group epoch is kept
with its trigger and the member that caused it; once every member has caught up with that epoch
(the group is Stable at it), the bump gets its reconcile time. Soft state: not in the log.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

HISTORY_LENGTH = 32

MEMBER_JOINED = "member_joined"
MEMBER_LEFT = "member_left"
SESSION_EXPIRED = "session_expired"
REBALANCE_TIMEOUT = "rebalance_timeout"
SUBSCRIPTION_CHANGED = "subscription_changed"
METADATA_CHANGED = "metadata_changed"
UPGRADED = "upgraded_from_classic"


@dataclass(slots=True)
class EpochBump:
    """One bump of the group epoch: why, by whom, when, and when every member had caught up with it
    (ConsumerGroupDescribe's history shows copies)."""

    epoch: int
    trigger: str
    member_id: str | None
    started_ms: int
    reconciled_ms: int | None = None

    @property
    def reconcile_ms(self) -> int | None:
        """From the bump until every member had caught up with it; None while reconciling."""
        return None if self.reconciled_ms is None else self.reconciled_ms - self.started_ms


class EpochHistory:
    def __init__(self) -> None:
        self.bumps: deque[EpochBump] = deque(maxlen=HISTORY_LENGTH)

    def bumped(self, epoch: int, trigger: str, member_id: str | None, now_ms: int) -> None:
        self.bumps.append(EpochBump(epoch, trigger, member_id, now_ms))

    def stable_at(self, epoch: int, now_ms: int) -> None:
        """The group is Stable at ``epoch``: the bumps up to it are reconciled now."""
        for bump in reversed(self.bumps):
            if bump.reconciled_ms is not None:
                break
            if bump.epoch <= epoch:
                bump.reconciled_ms = now_ms
