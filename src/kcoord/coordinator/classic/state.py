"""The five states of a classic group and the transitions Kafka allows between them.

Each state says what it accepts (Kafka's ``ClassicGroupState``):

- **Empty**: no members. New members may join; SyncGroup, Heartbeat and member commits get
  UNKNOWN_MEMBER_ID. Offsets linger until they expire. Also the state of "simple" groups that
  only commit offsets.
- **PreparingRebalance**: JoinGroups are parked until every known member rejoined (or the
  rebalance timeout passes). Heartbeat and SyncGroup answer REBALANCE_IN_PROGRESS.
- **CompletingRebalance**: joins answered, waiting for the leader's SyncGroup; followers'
  SyncGroups are parked. Heartbeats are fine, commits answer REBALANCE_IN_PROGRESS.
- **Stable**: assignment distributed; normal heartbeats and commits.
- **Dead**: the group is being removed or its partition unloaded; everything answers
  COORDINATOR_NOT_AVAILABLE so the client looks for the coordinator again.
"""

from __future__ import annotations

import enum


class ClassicGroupState(enum.StrEnum):
    """A ``str``: each state compares equal to Kafka's spelling ("Empty", "Stable", ...)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.EMPTY}
    ),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(ClassicGroupState),
}


def can_transition(source: ClassicGroupState, target: ClassicGroupState) -> bool:
    """Whether Kafka allows moving from ``source`` to ``target``."""
    return source in _VALID_PREVIOUS[target]
