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
    migration_policy: str = "bidirectional"
    """``group.consumer.migration.policy``: "upgrade" or "bidirectional" let an Empty classic group
    become a consumer group ("downgrade", the reverse, is not implemented)."""

    @property
    def upgrades_classic_groups(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")
