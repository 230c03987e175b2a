"""Share group metrics (KIP-932): records acquired, acknowledged by type, locks that expired, state
write rounds and the acknowledgements they carried, offsets of ``__share_group_state`` pruned, and
the share sessions and share partitions this node holds."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

_ACKNOWLEDGE_TYPES = {0: "gap", 1: "accept", 2: "release", 3: "reject", 4: "renew"}


class ShareMetrics:
    """What the share partitions' leader reports to (its ``ShareObserver``), as Prometheus metrics."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self.acquired_records = Counter(
            "kcoord_share_records_acquired",
            "Records handed out by ShareFetch under a lock.",
            registry=registry,
        )
        self.acknowledged_records = Counter(
            "kcoord_share_records_acknowledged",
            "Records acknowledged by share consumers, by acknowledge type (accept, release and reject"
            " once durable, renew at once).",
            ["type"],
            registry=registry,
        )
        self.expired_locks = Counter(
            "kcoord_share_lock_expirations",
            "Acquired records whose lock (group.share.record.lock.duration.ms) ran out.",
            registry=registry,
        )
        self.state_writes = Counter(
            "kcoord_share_state_writes",
            "Durable share-state write rounds (one WriteShareGroupState for one share partition).",
            registry=registry,
        )
        self.pruned_offsets = Counter(
            "kcoord_share_state_pruned_offsets",
            "Offsets of __share_group_state deleted because newer snapshots made them redundant.",
            registry=registry,
        )
        self.written_acknowledgements = Counter(
            "kcoord_share_state_write_acknowledgements",
            "Acknowledgement requests answered by those write rounds (over the rounds: the batching).",
            registry=registry,
        )

    def acquired(self, records: int) -> None:
        self.acquired_records.inc(records)

    def acknowledged(self, acknowledge_type: int, records: int) -> None:
        self.acknowledged_records.labels(_ACKNOWLEDGE_TYPES.get(acknowledge_type, "other")).inc(records)

    def locks_expired(self, records: int) -> None:
        self.expired_locks.inc(records)

    def state_written(self, acknowledgements: int) -> None:
        self.state_writes.inc()
        self.written_acknowledgements.inc(acknowledgements)

    def state_pruned(self, offsets: int) -> None:
        self.pruned_offsets.inc(offsets)

    def watch(self, sessions: Callable[[], float], partitions: Callable[[], float]) -> None:
        Gauge(
            "kcoord_share_sessions", "Open share sessions on this node.", registry=self._registry
        ).set_function(sessions)
        Gauge(
            "kcoord_share_partitions",
            "Share partitions (share group, topic partition) this node leads.",
            registry=self._registry,
        ).set_function(partitions)
