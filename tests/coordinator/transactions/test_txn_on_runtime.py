"""The transaction shard on the generic coordinator runtime: answers after durability, reload by replay.

No wiring yet (no API, no marker writer): this pins that the pure shard and its serde fit the
runtime's contract as they are, with a memory log under the real service and runners.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.coordinator.transactions.txn_harness import CONFIG, TP0, CountingAllocator

from kcoord.coordinator.transactions import (
    TRANSACTION_KEY_TYPE,
    TRANSACTION_STATE_TOPIC,
    EndTxnRequest,
    InitProducerIdRequest,
    TransactionCoordinatorShard,
    TransactionRecordSerde,
    TransactionState,
    partition_for,
)
from kcoord.coordinator.transactions.messages import AddPartitionsToTxnRequest
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.coordinator_type import CoordinatorType
from kcoord.runtime.service import CoordinatorService
from kcoord.storage.api import PartitionLog
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.api import Timer
from kcoord.timer.clock import SystemClock

PARTITIONS = 3
TRANSACTIONS = CoordinatorType(
    "transaction", TRANSACTION_STATE_TOPIC, TRANSACTION_KEY_TYPE, partition_for, TransactionRecordSerde()
)


class StateTopic:
    def __init__(self, store: MemoryLogStore) -> None:
        self.store = store

    async def ensure_topic(self, partitions: int) -> int:
        for partition in range(partitions):
            if self.store.get(TRANSACTION_STATE_TOPIC, partition) is None:
                await self.store.create(TRANSACTION_STATE_TOPIC, partition)
        return partitions

    def partition_log(self, partition: int) -> PartitionLog | None:
        return self.store.get(TRANSACTION_STATE_TOPIC, partition)


async def _service(store: MemoryLogStore, allocator: CountingAllocator) -> CoordinatorService:
    def new_shard(partition: int, timer: Timer) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(allocator, CONFIG, timer)

    service = CoordinatorService(
        TRANSACTIONS, StateTopic(store), SystemClock(), new_shard, num_partitions=PARTITIONS
    )
    await service.start()
    await asyncio.wait_for(service.loaded.wait(), 5)
    return service


def _shard(service: CoordinatorService, txn: str) -> TransactionCoordinatorShard:
    shard: TransactionCoordinatorShard = service.read(txn, lambda s: s)
    return shard


async def test_decision_survives_a_restart_and_completes_after_load() -> None:
    """InitProducerId, AddPartitionsToTxn and EndTxn answer once durable; a restart before the markers
    replays the PrepareCommit, whose completion then writes CompleteCommit."""
    store = MemoryLogStore()
    await store.open()
    allocator = CountingAllocator()
    service = await _service(store, allocator)
    txn = "pipeline-1"
    init: Any = await service.write(
        txn, lambda shard, sink, now: shard.init_producer_id(InitProducerIdRequest(txn, 60_000), sink, now)
    )
    assert (init.error, init.producer_epoch) == (ErrorCode.none, 0)
    pid = init.producer_id
    add = AddPartitionsToTxnRequest(txn, pid, 0, (TP0,))
    assert (
        await service.write(txn, lambda shard, sink, now: shard.add_partitions(add, sink, now))
        is ErrorCode.none
    )
    end = EndTxnRequest(txn, pid, 0, True)
    ended: Any = await service.write(txn, lambda shard, sink, now: shard.end_txn(end, sink, now))
    assert ended.error is ErrorCode.none
    await service.stop()

    again = await _service(store, allocator)
    shard = _shard(again, txn)
    assert shard.transactions[txn].state is TransactionState.PREPARE_COMMIT
    runner = again.runner(txn)
    runner.run(lambda now: shard.markers_written(txn, pid, 0, now))
    for _ in range(200):
        if shard.transactions[txn].state is TransactionState.COMPLETE_COMMIT:
            break
        await asyncio.sleep(0.01)
    assert shard.transactions[txn].state is TransactionState.COMPLETE_COMMIT
    await again.stop()

    third = await _service(store, allocator)
    assert _shard(third, txn).transactions[txn].state is TransactionState.COMPLETE_COMMIT
    await third.stop()
    await store.close()
