"""Settings of the classic group state machine (Kafka's ``GroupCoordinatorConfig`` defaults)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClassicGroupConfig:
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    max_size: int = 2_147_483_647
    # KAFKA-7610: a new member's parked JoinGroup is dropped after this long (hard-coded in Kafka).
    new_member_join_timeout_ms: int = 300_000
    # kcoord's fast failover: a dynamic member whose connection closed without a LeaveGroup keeps
    # its place only for a grace period of about two observed heartbeat intervals (never below the
    # floor, never past its session timeout).
    fast_failover: bool = True
    failover_grace_floor_ms: int = 1_000
    failover_default_heartbeat_ms: int = 3_000
