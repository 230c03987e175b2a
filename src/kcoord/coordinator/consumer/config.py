"""Settings of consumer groups (Kafka's ``group.consumer.*`` defaults)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignors: tuple[str, ...] = ("uniform", "range")
    """Server assignors members may ask for; the first is the group default."""
    max_size: int = 2_147_483_647
    failover_grace_floor_ms: int = 1_000
    """kcoord's fast failover: a dynamic member whose connection closed keeps its place for about
    two heartbeat intervals (never less than this, never past its session)."""
    migration_policy: str = "bidirectional"
    """``group.consumer.migration.policy``: "upgrade" or "bidirectional" let an Empty classic group
    become a consumer group ("downgrade", the reverse, is not implemented)."""

    @property
    def upgrades_classic_groups(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")
