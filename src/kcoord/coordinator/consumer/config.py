"""Settings of consumer groups (Kafka's ``group.consumer.*`` defaults)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

PartitionCount = Callable[[str], int | None]
"""The number of partitions of a topic, or None when it does not exist."""


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
    """``group.consumer.migration.policy`` (Kafka's online migration): "upgrade" lets a classic group
    become a consumer group when a consumer-protocol member joins it, "downgrade" lets a consumer
    group whose last consumer-protocol member left become a classic group again, "bidirectional"
    allows both and "disabled" neither (nor classic members in a consumer group)."""

    @property
    def upgrades_classic_groups(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrades_to_classic(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")

    @property
    def migration_enabled(self) -> bool:
        """Whether classic members may live in a consumer group (any policy but "disabled")."""
        return self.migration_policy != "disabled"
