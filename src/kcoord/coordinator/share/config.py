"""Settings of share groups and the share coordinator, with Apache Kafka 4.2's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AUTO_OFFSET_RESETS", "ShareGroupConfig"]

AUTO_OFFSET_RESETS = ("earliest", "latest")
"""``share.auto.offset.reset``'s values kcoord knows (Kafka 4.1's ``by_duration:`` is not here yet)."""


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000
    """``group.share.session.timeout.ms``."""
    heartbeat_interval_ms: int = 5_000
    """``group.share.heartbeat.interval.ms``."""
    max_size: int = 200
    """``group.share.max.size``: members per share group."""
    record_lock_duration_ms: int = 30_000
    """``group.share.record.lock.duration.ms``: how long an acquired record stays locked to its member."""
    delivery_count_limit: int = 5
    """``group.share.delivery.count.limit``: a record delivered this often is archived, not redelivered."""
    partition_max_record_locks: int = 2_000
    """``group.share.partition.max.record.locks`` (Kafka 4.2's default; 4.0 had 200): in-flight records
    per share partition."""
    auto_offset_reset: str = "latest"
    """``share.auto.offset.reset``: where a share partition starts the first time it is read."""
    initialize_retry_interval_ms: int = 30_000
    """``group.share.initialize.retry.interval.ms``: when an unconfirmed initialisation is asked again."""
    snapshot_update_records_per_snapshot: int = 500
    """``share.coordinator.snapshot.update.records.per.snapshot``: updates between two snapshots."""
    state_topic_num_partitions: int = 50
    """``share.coordinator.state.topic.num.partitions``: partitions of ``__share_group_state``."""

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in AUTO_OFFSET_RESETS:
            raise ValueError(f"share.auto.offset.reset must be one of {AUTO_OFFSET_RESETS}")
        if self.delivery_count_limit < 1 or self.partition_max_record_locks < 1:
            raise ValueError("the delivery count limit and the record locks must be positive")
