"""Transactional offsets (TxnOffsetCommit) waiting for their transaction's marker.

A TxnOffsetCommit writes ordinary OffsetCommit records, but in a transactional batch of the
producer. Replaying such a record (live once durable, or at load) does not touch the committed
offsets: it files the offset here under the producer id, where OffsetFetch does not see it
(``require_stable`` fetches answer UNSTABLE_OFFSET_COMMIT for the partition instead). The
producer's commit marker moves its offsets to the committed ones; an abort marker drops them.
This is Kafka's ``pendingTransactionalOffsets`` and ``openTransactions`` of
``OffsetMetadataManager``.

Kafka keeps the most recent commit when transactional and plain commits mix: a pending offset
is materialized only when its record is later in the log than the committed one. kcoord replays
in log order, so "later" is decided without record offsets (the plain commit path records
nothing extra): each pending offset remembers the committed entry it saw when it was replayed
(``before``, by identity) and a sequence number. At the marker the committed entry is either
still ``before`` (nothing newer: materialize), or a pending offset materialized since, whose
sequence says which came first, or a plain commit replayed since (newer: skip).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from kcoord.coordinator.offset_messages import CommittedOffset

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PendingOffset:
    """One transactional offset: the entry it would commit, and what it saw when it was replayed."""

    committed: CommittedOffset
    sequence: int
    """Order of replay among pending offsets of this shard (a stand-in for the record's log offset)."""
    before: CommittedOffset | None
    """The committed entry of the partition when this was replayed (compared by identity)."""


ProducerOffsets = dict[str, dict[TopicPartition, PendingOffset]]
"""One producer's pending offsets: group id -> (topic, partition) -> offset."""

SETTLED_KEPT = 10
"""Ended transactions kept per group for its history (soft state: replaying the markers rebuilds it)."""
SETTLED_GROUPS_KEPT = 10_000
"""Groups whose ended transactions are kept (the least recently settled dropped first)."""


@dataclass(frozen=True, slots=True)
class SettledTransaction:
    """A transaction that held offsets of a group and ended: who, how, and how many partitions."""

    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: int


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """An open transaction holding pending offsets of a group: its epoch and (topic, partition, offset)s."""

    producer_id: int
    producer_epoch: int
    offsets: list[tuple[str, int, int]]


class PendingOffsets:
    """The pending transactional offsets of one shard, by producer and by group."""

    def __init__(self) -> None:
        self._by_producer: dict[int, ProducerOffsets] = {}
        self._open: dict[str, dict[TopicPartition, set[int]]] = {}
        """group -> partition -> producer ids with a pending offset there (Kafka's openTransactions)."""
        self._epochs: dict[int, int] = {}
        """The epoch of each producer with pending offsets (an older epoch is a fenced producer's)."""
        self._settled: OrderedDict[str, deque[SettledTransaction]] = OrderedDict()
        self._sequence = 0
        self._materialized: dict[tuple[str, str, int], tuple[CommittedOffset, int]] = {}
        """Pending offsets committed while other transactions of their group stay open: the entry
        and its sequence, so a later marker can tell which of two transactions wrote last."""

    def __bool__(self) -> bool:
        return bool(self._open)

    def add(
        self,
        producer_id: int,
        producer_epoch: int,
        group: str,
        topic: str,
        partition: int,
        committed: CommittedOffset,
        before: CommittedOffset | None,
    ) -> None:
        """Replay of a transactional OffsetCommit record (the producer's newer one replaces its older)."""
        self._sequence += 1
        self._epochs[producer_id] = max(producer_epoch, self._epochs.get(producer_id, producer_epoch))
        offsets = self._by_producer.setdefault(producer_id, {}).setdefault(group, {})
        offsets[(topic, partition)] = PendingOffset(committed, self._sequence, before)
        self._open.setdefault(group, {}).setdefault((topic, partition), set()).add(producer_id)

    def drop_partition(self, group: str, topic: str, partition: int) -> None:
        """A tombstone for the partition: every transaction's pending offset for it goes too (as Kafka)."""
        by_partition = self._open.get(group)
        if by_partition is None:
            return
        producers = by_partition.pop((topic, partition), set())
        for producer_id in producers:
            offsets = self._by_producer.get(producer_id, {}).get(group)
            if offsets is not None:
                offsets.pop((topic, partition), None)
        if not by_partition:
            self._forget_group(group)

    def end(self, producer_id: int) -> ProducerOffsets:
        """The producer's transaction ended: its pending offsets, no longer pending (empty if none).

        The caller materializes them (:meth:`written_later`, :meth:`note_materialized`), then calls
        :meth:`settled` with them."""
        self._epochs.pop(producer_id, None)
        offsets = self._by_producer.pop(producer_id, None)
        if offsets is None:
            return {}
        for group, partitions in offsets.items():
            by_partition = self._open.get(group)
            if by_partition is None:
                continue
            for key in partitions:
                producers = by_partition.get(key)
                if producers is not None:
                    producers.discard(producer_id)
                    if not producers:
                        del by_partition[key]
            if not by_partition:
                del self._open[group]
        return offsets

    def settled(self, ended: ProducerOffsets, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """The offsets :meth:`end` returned are materialized (or dropped): forget what only they needed,
        and keep the transaction in each of its groups' history."""
        for group, partitions in ended.items():
            if group not in self._open:
                self._forget_group(group)
            kept = self._settled.pop(group, None) or deque(maxlen=SETTLED_KEPT)
            kept.append(SettledTransaction(producer_id, producer_epoch, committed, len(partitions)))
            self._settled[group] = kept
        while len(self._settled) > SETTLED_GROUPS_KEPT:
            self._settled.popitem(last=False)

    def written_later(
        self, group: str, topic: str, partition: int, current: CommittedOffset | None, pending: PendingOffset
    ) -> bool:
        """Whether ``current`` (the committed entry now) was written after ``pending``'s record."""
        if current is pending.before:
            return False
        materialized = self._materialized.get((group, topic, partition))
        if materialized is not None and materialized[0] is current:
            return materialized[1] > pending.sequence
        return True

    def note_materialized(self, group: str, topic: str, partition: int, pending: PendingOffset) -> None:
        """``pending`` became the committed entry; remembered while its group has open transactions."""
        if group in self._open:
            self._materialized[(group, topic, partition)] = (pending.committed, pending.sequence)

    def _forget_group(self, group: str) -> None:
        self._open.pop(group, None)
        for key in [key for key in self._materialized if key[0] == group]:
            del self._materialized[key]

    # ------------------------------------------------------------ reads

    def epoch_of(self, producer_id: int) -> int | None:
        """The producer's epoch while it has pending offsets here, else None."""
        return self._epochs.get(producer_id)

    def has_partition(self, group: str, topic: str, partition: int) -> bool:
        by_partition = self._open.get(group)
        return by_partition is not None and (topic, partition) in by_partition

    def has_group(self, group: str) -> bool:
        return group in self._open

    def partitions(self, group: str) -> list[TopicPartition]:
        """The group's partitions with a pending offset, sorted."""
        return sorted(self._open.get(group, {}))

    def groups(self) -> list[str]:
        return sorted(self._open)

    def producers(self, group: str) -> list[int]:
        """Producer ids of the open transactions holding offsets of the group, sorted."""
        return sorted({p for producers in self._open.get(group, {}).values() for p in producers})

    def open_transactions(self, group: str) -> list[OpenTransaction]:
        """The open transactions holding offsets of the group, by producer id."""
        return [
            OpenTransaction(
                producer_id,
                self._epochs.get(producer_id, -1),
                [
                    (topic, partition, pending.committed.offset)
                    for (topic, partition), pending in sorted(self._by_producer[producer_id][group].items())
                ],
            )
            for producer_id in self.producers(group)
            if self._by_producer.get(producer_id, {}).get(group)
        ]

    def settled_transactions(self, group: str) -> list[SettledTransaction]:
        """The group's last ended transactions, oldest first."""
        return list(self._settled.get(group, ()))
