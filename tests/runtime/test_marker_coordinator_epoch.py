"""The coordinator epoch on a transaction's markers: the epoch the node coordinates the id's
``__transaction_state`` partition under travels on every marker, and a marker refused with
TRANSACTION_COORDINATOR_FENCED (a newer coordinator wrote there) stops the transaction on this node
without completing it, as Kafka's coordinator abandons it."""

from __future__ import annotations

import asyncio
import itertools

from kcoord.cluster.producer_id_allocator import ReadyProducerIds
from kcoord.coordinator.transactions import (
    TRANSACTION_STATE_TOPIC,
    EndTxnRequest,
    TopicPartition,
    TransactionConfig,
    TxnMarker,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.marker_dispatcher import MarkerDispatcher, TransactionKey
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.timer.clock import SystemClock
from tests.runtime.test_transaction_coordinator import (
    OFFSETS_PARTITIONS,
    TXN_PARTITIONS,
    StateTopic,
    begin,
    eventually,
    open_store,
    state_of,
)


class EpochRecorder:
    """A data-partition marker writer that records each marker's coordinator epoch and answers
    ``answer``."""

    def __init__(self, answer: ErrorCode = ErrorCode.none) -> None:
        self.answer = answer
        self.epochs: list[tuple[str, int, int]] = []

    async def write_marker(self, marker: TxnMarker, coordinator_epoch: int) -> ErrorCode:
        self.epochs.append((marker.partition.topic, marker.partition.partition, coordinator_epoch))
        return self.answer


_ids = itertools.count(5000)


async def _next_id() -> int:
    return next(_ids)


async def test_markers_carry_the_epoch_of_the_ids_state_partition() -> None:
    """Every marker of a commit carries the epoch given for the id's ``__transaction_state``
    partition (its leader epoch in a cluster)."""
    asked: list[tuple[str, int]] = []

    def epoch_of(topic: str, partition: int) -> int:
        asked.append((topic, partition))
        return 40 + partition

    writer = EpochRecorder()
    ids = ReadyProducerIds(_next_id)
    service = TransactionCoordinator(
        StateTopic(await open_store()),
        SystemClock(),
        ids,
        TransactionConfig(offsets_topic_partitions=OFFSETS_PARTITIONS),
        marker_writer=writer,
        coordinator_epoch=epoch_of,
        num_partitions=TXN_PARTITIONS,
    )
    ids.start()
    await service.start()
    try:
        await asyncio.wait_for(service.loaded.wait(), 5)
        producer = await begin(service, "tx-epoch", 0, 1)
        assert (await service.end_txn(EndTxnRequest("tx-epoch", *producer, committed=True))).error == 0
        await eventually(lambda: state_of(service, "tx-epoch") == "CompleteCommit", "CompleteCommit")
        state_partition = service.partition_for("tx-epoch")
        assert asked == [(TRANSACTION_STATE_TOPIC, state_partition)]
        assert sorted(writer.epochs) == [("t", 0, 40 + state_partition), ("t", 1, 40 + state_partition)]
    finally:
        await service.stop()
        await ids.stop()


async def test_a_fenced_coordinator_stops_without_completing() -> None:
    """TRANSACTION_COORDINATOR_FENCED is not retried and the transaction is not completed here."""
    writer = EpochRecorder(ErrorCode.transaction_coordinator_fenced)
    completed: list[TransactionKey] = []
    dispatcher = MarkerDispatcher(writer, completed.append, coordinator_epoch=lambda tid: 3)
    dispatcher.dispatch([TxnMarker(TopicPartition("t", 0), 11, 2, True, "tx-fenced")])
    await eventually(lambda: dispatcher.in_flight == 0, "the transaction's task ended")
    assert writer.epochs == [("t", 0, 3)]
    assert completed == [] and dispatcher.retries == 0
