"""What makes one coordinator different from another, for the one runtime that runs them all.

Kafka runs its group, transaction and share coordinators on one ``CoordinatorRuntime<S, U>``; so
does kcoord. A coordinator is a :class:`CoordinatorType`: the internal topic its records live in,
how a key (a group id, a transactional id) picks a partition of it, how its records are written
and read (:class:`RecordSerde`), and the FindCoordinator key type clients ask for it by. Its state
machine is a :class:`CoordinatorShard`, one per partition, made by a factory the composition root
hands to :class:`~kcoord.runtime.service.CoordinatorService`. Everything else (one serial runner
per partition, answer after durability, loading by replay, timers, ownership in a cluster) is the
runtime's and the same for every coordinator.

The group coordinator is the first instance (:mod:`kcoord.runtime.group_coordinator`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.plain_batch import EncodedBatch

__all__ = ["CoordinatorShard", "CoordinatorType", "FastReplay", "RecordSerde", "TransactionalRecordSerde"]

FastReplay = Callable[[bytes, "bytes | None"], bool]
"""``(key, value) -> handled``: a serde's shortcut that replays a record without building it."""


class CoordinatorShard(Protocol):
    """What the runtime needs of one partition's state machine (Kafka's ``CoordinatorShard``)."""

    def replay(self, record: Any, offset: int, producer_id: int, producer_epoch: int) -> None:
        """Apply one record of the log: at load, the same state change a live write made.

        ``offset`` is the record's offset in the log; ``producer_id`` and ``producer_epoch`` are
        its batch's (-1 for a batch that no producer wrote transactionally)."""

    def replay_end_transaction_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """A transaction marker of the log: the producer's pending records are committed or aborted."""

    def on_appended(self, records: list[Any]) -> None:
        """Records of a live operation are durable."""

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        """Loading finished: arm timers for what was loaded."""

    def on_timer(self, key: str, now_ms: int) -> CoordinatorResult: ...

    def unload(self) -> CoordinatorResult:
        """The partition goes away: fail parked requests."""


class RecordSerde(Protocol):
    """How a coordinator's records are written to and read from its topic."""

    def encode_batch(self, records: list[Any], now_ms: int) -> EncodedBatch:
        """One uncompressed batch holding ``records`` (offsets relative; the log assigns the base)."""

    def decode(self, key: bytes, value: bytes | None) -> Any | None:
        """One record, or None for a record type this coordinator does not know (skipped).

        Raises ``ValueError`` for a record it knows but cannot read."""

    def fast_replay(self, shard: Any) -> FastReplay | None:
        """A shortcut for the commonest records at load, bound to ``shard`` (None: no shortcut)."""


@runtime_checkable
class TransactionalRecordSerde(RecordSerde, Protocol):
    """A serde whose coordinator also writes records of a producer's transaction (the group
    coordinator's TxnOffsetCommit)."""

    def encode_transactional_batch(
        self, records: list[Any], producer_id: int, producer_epoch: int, now_ms: int
    ) -> EncodedBatch:
        """One transactional batch of ``producer_id`` holding ``records``."""


@dataclass(frozen=True, slots=True)
class CoordinatorType:
    """One kind of coordinator: its topic, partition function, record serde and key type."""

    name: str
    """Short name for logs and errors: ``group``, later ``transaction`` and ``share``."""
    topic: str
    """The internal topic whose partitions hold this coordinator's records."""
    key_type: int
    """FindCoordinator's ``key_type`` for this coordinator (0 group, 1 transaction, 2 share)."""
    partition_for: Callable[[str, int], int]
    """``(key, partition count) -> partition``: where a group id (or other key) lives."""
    serde: RecordSerde
    log_name: str = ""
    """What its partitions are called in log events (``<log_name>.loaded``, ``.loading``): the group
    coordinator keeps ``offsets_partitions``, which operators and the bench watch; empty means
    ``<name>_partitions``."""

    @property
    def partitions_event(self) -> str:
        return self.log_name or f"{self.name}_partitions"
