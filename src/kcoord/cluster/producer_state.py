"""Idempotent producers: producer ids, epochs and the last batches' sequence numbers.

Two jobs, both on the event loop:

1. **Producer ids** for InitProducerId, out of blocks reserved in the data directory or, in a
   cluster, in PostgreSQL (:mod:`kcoord.cluster.producer_ids`), so ids never repeat across
   restarts nor across nodes.
2. **Sequence checks** on Produce, per (producer id, topic, partition), as Kafka's
   ``ProducerStateManager`` does: the epoch, the last sequence, and the first/last sequence and
   base offset of the last :data:`BATCHES_KEPT` batches (the client's max.in.flight limit).

   - an older epoch => INVALID_PRODUCER_EPOCH;
   - a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
   - a batch equal (epoch, first and last sequence) to a kept one is a duplicate: it is not
     appended again and is answered with the original base offset and error NONE;
   - otherwise the first sequence must follow the last one (sequences wrap at 2**31), else
     OUT_OF_ORDER_SEQUENCE_NUMBER.

   A batch of an unknown producer is accepted whatever its sequence (as Kafka does when the
   producer's state has expired). Across restarts the state is rebuilt from the log and its
   snapshots (:mod:`kcoord.cluster.producer_snapshots`) and loaded with :meth:`restore` before
   the listener opens, so a retry that spans a restart is still recognised as a duplicate.

   In a cluster (``gated``) a partition's state exists only while this node owns it: the new
   owner rebuilds it (:mod:`kcoord.cluster.producer_handover`) and :meth:`restore` opens the
   partition to idempotent batches; until then they are answered NOT_LEADER_OR_FOLLOWER (what a
   Kafka broker answers before it has become the partition's leader), so the producer retries
   once the state is there. :meth:`drop_partition` closes it again when the node lets it go.

The check and the bookkeeping happen in one synchronous step that the caller runs immediately
before starting the log append (whose offsets are assigned before its first suspension), so two
produce requests of the same partition cannot interleave between check and offset assignment.
The base offset is filled in when the append returns; a duplicate of a batch still being
appended waits for it.

Transactions (:mod:`kcoord.cluster.partition_transactions`): a transactional batch opens its
producer's transaction on the partition (:meth:`begin_transaction`, in the same synchronous step as
the sequence check), a marker ends it (:meth:`end_transaction`); the partition's last stable offset
and aborted index follow. A marker's epoch older than the producer's on that partition is refused
(INVALID_PRODUCER_EPOCH); a newer one (the coordinator fencing the producer) becomes its epoch.

State of a producer id not seen for :data:`PRODUCER_EXPIRATION_MS` (Kafka's
``producer.id.expiration.ms`` default) is dropped, checked at most once a minute.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kcoord.cluster.partition_transactions import AbortedTransaction, PartitionTransactions
from kcoord.cluster.producer_ids import (
    ID_BLOCK_FILE,
    ID_BLOCK_SIZE,
    FileIdReservations,
    IdReservations,
    ProducerIdBlocks,
)
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.timer.api import Clock
from kcoord.timer.clock import SystemClock

__all__ = [
    "BATCHES_KEPT",
    "ID_BLOCK_FILE",
    "ID_BLOCK_SIZE",
    "PRODUCER_EXPIRATION_MS",
    "BatchSlot",
    "ProducerStateManager",
    "ProducerView",
    "StoredBatch",
    "StoredProducer",
]

BATCHES_KEPT = 5
PRODUCER_EXPIRATION_MS = 86_400_000
MAX_EPOCH = 32767
"""Kafka's Short.MAX_VALUE; a producer at this epoch gets a new id instead of a bump."""

_SEQUENCE_MODULUS = 1 << 31
_SWEEP_INTERVAL_MS = 60_000


@dataclass(slots=True, eq=False)
class BatchSlot:
    """One accepted batch of an idempotent producer: its sequences and, once appended, its offset.

    A slot whose ``repeats`` is set stands for a duplicate of that earlier batch: the caller must
    answer with :meth:`original` instead of appending.
    """

    first_sequence: int
    last_sequence: int
    repeats: BatchSlot | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    _settled: asyncio.Future[None] | None = None
    _failure: KafkaError | None = None

    @property
    def duplicate(self) -> bool:
        return self.repeats is not None

    def complete(self, base_offset: int, log_append_time_ms: int) -> None:
        """Record where the batch landed (called when the append returns)."""
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self._settle()

    async def original(self) -> tuple[int, int]:
        """(base offset, log append time) of the batch this duplicate repeats, once it is appended."""
        target = self.repeats or self
        if target.base_offset < 0 and target._failure is None:
            if target._settled is None:
                target._settled = asyncio.get_running_loop().create_future()
            await asyncio.shield(target._settled)
        if target._failure is not None:
            raise KafkaError(target._failure.code, target._failure.message)
        return target.base_offset, target.log_append_time_ms

    def _fail(self, exc: BaseException) -> None:
        code = exc.code if isinstance(exc, KafkaError) else ErrorCode.unknown_server_error
        self._failure = KafkaError(code, str(exc))
        self._settle()

    def _settle(self) -> None:
        if self._settled is not None and not self._settled.done():
            self._settled.set_result(None)


@dataclass(slots=True)
class StoredBatch:
    """A batch of an idempotent producer as the log holds it."""

    first_sequence: int
    last_sequence: int
    base_offset: int
    log_append_time_ms: int


@dataclass(slots=True)
class StoredProducer:
    """One producer's state on one partition as the log holds it: its epoch and newest batches."""

    epoch: int
    batches: list[StoredBatch]
    """Oldest first, at most :data:`BATCHES_KEPT`."""
    last_timestamp: int = -1
    """The newest batch's max timestamp (DescribeProducers)."""
    coordinator_epoch: int = -1
    """The coordinator epoch of the producer's last marker on the partition."""


@dataclass(frozen=True, slots=True)
class ProducerView:
    """One producer's state on one partition, as DescribeProducers answers it."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    transaction_start_offset: int
    """-1 when no transaction of this producer is open on the partition."""


@dataclass(slots=True, eq=False)
class _PartitionProducer:
    """One producer's state on one partition."""

    epoch: int
    last_sequence: int
    seen_at: int
    batches: deque[BatchSlot] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp: int = -1
    coordinator_epoch: int = -1


class ProducerStateManager:
    def __init__(
        self,
        data_dir: Path,
        *,
        id_block_size: int = ID_BLOCK_SIZE,
        reservations: IdReservations | None = None,
        gated: bool = False,
        clock: Clock | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._ids = ProducerIdBlocks(
            reservations or FileIdReservations(Path(data_dir) / ID_BLOCK_FILE), id_block_size
        )
        self._epochs: dict[int, tuple[int, int]] = {}
        """Producer id -> (current epoch, when issued) for ids issued since this start."""
        self._partitions: dict[tuple[int, str, int], _PartitionProducer] = {}
        self._gated = gated
        self._transactions: dict[tuple[str, int], PartitionTransactions] = {}
        self._stable_listeners: dict[tuple[str, int], list[Callable[[int], None]]] = {}
        """Per partition: told the new high watermark bound each time a transaction there ends."""
        self._open: set[tuple[str, int]] = set()
        """When gated: the partitions whose state is loaded (idempotent batches are accepted)."""
        self._last_sweep = self._clock.now_ms()

    def reserve_ids_from(self, reservations: IdReservations) -> None:
        """Take the next blocks of producer ids from ``reservations`` (a cluster's database)."""
        self._ids = ProducerIdBlocks(reservations, self._ids.block_size)

    async def new_producer_id(self) -> int:
        """A producer id never handed out before (the transaction coordinator's ids come from here too)."""
        return await self._ids.next_id()

    # InitProducerId

    async def init_producer(self, producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
        """(producer id, epoch) for an idempotent producer.

        A producer that names its current id and epoch (InitProducerId v3+, KIP-360) gets the
        epoch bumped when this node knows that id at that epoch (it issued or bumped it, or
        restored it from a partition it serves). Anything else (no id, an id this node has not
        seen, a stale epoch, an exhausted epoch) gets a fresh id at epoch 0, which every client
        accepts: that is also what Kafka answers a producer without a transactional id, and what
        a producer whose InitProducerId lands on another node of a cluster gets.
        """
        now = self._clock.now_ms()
        self._maybe_sweep(now)
        known = self._epochs.get(producer_id) if producer_id >= 0 else None
        if known is not None and known[0] == producer_epoch and producer_epoch < MAX_EPOCH:
            self._epochs[producer_id] = (producer_epoch + 1, now)
            return producer_id, producer_epoch + 1
        new_id = await self._ids.next_id()
        self._epochs[new_id] = (0, self._clock.now_ms())
        return new_id, 0

    def restore(
        self,
        topic: str,
        partition: int,
        producers: Mapping[int, StoredProducer],
        transactions: PartitionTransactions | None = None,
    ) -> None:
        """Load the state the log holds for ``topic``-``partition`` (at start, before any Produce, or
        when this node of a cluster takes the partition over) and open it to idempotent batches.

        Each restored batch is a completed slot, so a retry of it is answered with its stored
        offset; the producer's epoch is current again for an InitProducerId epoch bump (KIP-360).
        """
        now = self._clock.now_ms()
        for producer_id, stored in producers.items():
            if not stored.batches:
                continue
            state = _PartitionProducer(stored.epoch, stored.batches[-1].last_sequence, now)
            state.last_timestamp, state.coordinator_epoch = stored.last_timestamp, stored.coordinator_epoch
            for batch in stored.batches:
                state.batches.append(
                    BatchSlot(
                        batch.first_sequence,
                        batch.last_sequence,
                        base_offset=batch.base_offset,
                        log_append_time_ms=batch.log_append_time_ms,
                    )
                )
            self._partitions[(producer_id, topic, partition)] = state
            known = self._epochs.get(producer_id)
            if known is None or known[0] < stored.epoch:
                self._epochs[producer_id] = (stored.epoch, now)
        if transactions is not None:
            self._transactions[(topic, partition)] = transactions.copy()
        self._open.add((topic, partition))

    def drop_partition(self, topic: str, partition: int) -> int:
        """Forget every producer's state on ``topic``-``partition`` (this node no longer serves it);
        when gated, its idempotent batches are refused until a :meth:`restore`. Returns how many
        producers' state went."""
        self._open.discard((topic, partition))
        self._transactions.pop((topic, partition), None)
        doomed = [key for key in self._partitions if key[1] == topic and key[2] == partition]
        for key in doomed:
            del self._partitions[key]
        return len(doomed)

    def is_open(self, topic: str, partition: int) -> bool:
        """Whether idempotent batches of ``topic``-``partition`` are checked now (always, ungated)."""
        return not self._gated or (topic, partition) in self._open

    # Produce

    def check_and_record(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        first_sequence: int,
        record_count: int,
        max_timestamp: int = -1,
    ) -> BatchSlot:
        """Check one idempotent batch and record it; see the module docstring for the rules.

        Returns the new slot (to :meth:`BatchSlot.complete` or :meth:`forget`), or a slot that
        ``repeats`` an earlier batch. Raises ``KafkaError`` for epoch and sequence errors.
        """
        if self._gated and (topic, partition) not in self._open:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"{topic}-{partition}: the idempotent producers' state is not loaded on this node yet",
            )
        last_sequence = (first_sequence + record_count - 1) % _SEQUENCE_MODULUS
        key = (producer_id, topic, partition)
        now = self._clock.now_ms()
        state = self._partitions.get(key)
        if state is None:
            state = _PartitionProducer(producer_epoch, last_sequence, now)
            self._partitions[key] = state
        elif producer_epoch < state.epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"producer {producer_id} epoch {producer_epoch} is older than {state.epoch}",
            )
        elif producer_epoch > state.epoch:
            if first_sequence != 0:
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"a new epoch must start at sequence 0, not {first_sequence}",
                )
            state.epoch = producer_epoch
            state.batches.clear()
        else:
            for slot in state.batches:
                if slot.first_sequence == first_sequence and slot.last_sequence == last_sequence:
                    state.seen_at = now
                    return BatchSlot(first_sequence, last_sequence, repeats=slot)
            expected = (state.last_sequence + 1) % _SEQUENCE_MODULUS
            if first_sequence != expected:
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"expected sequence {expected}, got {first_sequence}",
                )
        state.last_sequence = last_sequence
        state.seen_at = now
        state.last_timestamp = max_timestamp
        slot = BatchSlot(first_sequence, last_sequence)
        state.batches.append(slot)
        return slot

    def forget(
        self, topic: str, partition: int, producer_id: int, slot: BatchSlot, exc: BaseException
    ) -> None:
        """Undo :meth:`check_and_record` for a batch whose append failed, so the client may retry it.

        If later batches were accepted meanwhile, only the slot goes; the sequence stays where
        those batches left it.
        """
        slot._fail(exc)
        state = self._partitions.get((producer_id, topic, partition))
        if state is None or slot not in state.batches:
            return
        if state.batches[-1] is slot:
            state.batches.pop()
            state.last_sequence = (slot.first_sequence - 1) % _SEQUENCE_MODULUS
        else:
            state.batches.remove(slot)

    # Transactions

    def transactions(self, topic: str, partition: int) -> PartitionTransactions:
        """The open transactions and aborted index of ``topic``-``partition`` (created empty)."""
        found = self._transactions.get((topic, partition))
        if found is None:
            found = self._transactions[(topic, partition)] = PartitionTransactions()
        return found

    def last_stable_offset(
        self, topic: str, partition: int, high_watermark: int, log_start_offset: int = 0
    ) -> int:
        """The partition's LSO: its oldest open transaction's first offset, else ``high_watermark``."""
        if not self._transactions:
            return high_watermark  # no partition has seen a transaction (the common case)
        found = self._transactions.get((topic, partition))
        return high_watermark if found is None else found.last_stable_offset(high_watermark, log_start_offset)

    def first_unstable_offset(self, topic: str, partition: int) -> int | None:
        """The first offset of the partition's oldest open transaction (None: none is open)."""
        found = self._transactions.get((topic, partition))
        return None if found is None else found.first_unstable_offset()

    def aborted_between(
        self, topic: str, partition: int, fetch_offset: int, upper_bound: int
    ) -> list[AbortedTransaction]:
        """The partition's aborted transactions overlapping [``fetch_offset``, ``upper_bound``)."""
        found = self._transactions.get((topic, partition))
        return [] if found is None else found.aborted_between(fetch_offset, upper_bound)

    def watch_stable(self, topic: str, partition: int, listener: Callable[[int], None]) -> Callable[[], None]:
        """Call ``listener(marker offset)`` each time a transaction on the partition ends (the LSO may
        move); returns the function that stops it."""
        listeners = self._stable_listeners.setdefault((topic, partition), [])
        listeners.append(listener)

        def unregister() -> None:
            if listener in listeners:
                listeners.remove(listener)
            if not listeners and self._stable_listeners.get((topic, partition)) is listeners:
                del self._stable_listeners[(topic, partition)]

        return unregister

    def trim_aborted(self, topic: str, partition: int, log_start_offset: int) -> int:
        """Drop the partition's aborted entries whose marker is below the log start."""
        found = self._transactions.get((topic, partition))
        return 0 if found is None else found.trim_before(log_start_offset)

    def begin_transaction(self, topic: str, partition: int, producer_id: int, log_end_offset: int) -> bool:
        """A transactional batch whose append starts now (``log_end_offset``: the partition's end,
        a lower bound of its offset); True when it opened the producer's transaction."""
        return self.transactions(topic, partition).begin(producer_id, log_end_offset)

    def settle_transaction_start(
        self, topic: str, partition: int, producer_id: int, provisional: int, base_offset: int
    ) -> None:
        self.transactions(topic, partition).settle_first(producer_id, provisional, base_offset)

    def cancel_transaction_start(
        self, topic: str, partition: int, producer_id: int, provisional: int
    ) -> None:
        self.transactions(topic, partition).cancel(producer_id, provisional)

    def check_marker(
        self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int = -1
    ) -> None:
        """Raise INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch on the partition,
        TRANSACTION_COORDINATOR_FENCED for one from an older coordinator epoch than the last marker's
        (Kafka's ``checkCoordinatorEpoch``), NOT_LEADER_OR_FOLLOWER while a gated partition's state
        is not loaded.

        Called in the same synchronous step as the marker's append starts: a marker with a newer
        epoch (the coordinator fencing the producer) fences the older epoch at once, so a batch of
        the old epoch whose append would start after the marker's (and land after it, outside the
        transaction the marker ends) is refused as Kafka refuses it under its log lock."""
        if self._gated and (topic, partition) not in self._open:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"{topic}-{partition}: the producers' state is not loaded on this node yet",
            )
        state = self._partitions.get((producer_id, topic, partition))
        if state is not None and producer_epoch < state.epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"marker of producer {producer_id} at epoch {producer_epoch}, older than {state.epoch}",
            )
        if state is not None and coordinator_epoch < state.coordinator_epoch:
            raise KafkaError(
                ErrorCode.transaction_coordinator_fenced,
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {state.coordinator_epoch}",
            )
        if state is not None and producer_epoch > state.epoch:
            state.epoch, state.last_sequence = producer_epoch, -1
            state.batches.clear()

    def end_transaction(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        marker_offset: int,
        committed: bool,
    ) -> None:
        """The marker at ``marker_offset`` is in the log: the producer's transaction there ends."""
        self.transactions(topic, partition).end(producer_id, marker_offset, committed)
        key = (producer_id, topic, partition)
        now = self._clock.now_ms()
        state = self._partitions.get(key)
        if state is None:
            state = self._partitions[key] = _PartitionProducer(producer_epoch, -1, now)
        elif producer_epoch > state.epoch:
            state.epoch, state.last_sequence = producer_epoch, -1
            state.batches.clear()
        state.coordinator_epoch = coordinator_epoch
        state.seen_at = now
        for listener in list(self._stable_listeners.get((topic, partition), ())):
            listener(marker_offset)

    def describe(self, topic: str, partition: int) -> list[ProducerView]:
        """Every producer with state on ``topic``-``partition`` (DescribeProducers)."""
        found = self._transactions.get((topic, partition))
        open_transactions = found.open if found is not None else {}
        return [
            ProducerView(
                pid,
                state.epoch,
                state.last_sequence,
                state.last_timestamp,
                state.coordinator_epoch,
                open_transactions.get(pid, -1),
            )
            for (pid, t, p), state in sorted(self._partitions.items(), key=lambda item: item[0])
            if t == topic and p == partition
        ]

    def _maybe_sweep(self, now: int) -> None:
        if now - self._last_sweep < _SWEEP_INTERVAL_MS:
            return
        self._last_sweep = now
        horizon = now - PRODUCER_EXPIRATION_MS
        self._partitions = {
            k: s
            for k, s in self._partitions.items()
            if s.seen_at >= horizon or self._has_open_transaction(k[0], k[1], k[2])
        }
        self._epochs = {pid: e for pid, e in self._epochs.items() if e[1] >= horizon}

    def _has_open_transaction(self, producer_id: int, topic: str, partition: int) -> bool:
        found = self._transactions.get((topic, partition))
        return found is not None and producer_id in found.open

    def producer_count(self) -> int:
        """Producer ids with state on at least one partition (for metrics and tests)."""
        return len({key[0] for key in self._partitions})
