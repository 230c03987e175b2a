"""A transaction shard driven by hand: a counting allocator, a manual clock, and the runtime's part.

:class:`TxnHarness` plays the runtime: it hands a result's records to ``on_appended`` (they are
durable), keeps every record it appended in order (the log), and returns the responses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kcoord.coordinator.transactions import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TopicPartition,
    TransactionConfig,
    TransactionCoordinatorShard,
    TransactionRecord,
    TransactionResult,
)
from kcoord.coordinator.transactions.metadata import TransactionMetadata
from kcoord.protocol.errors import ErrorCode, KafkaError

TXN = "txn-a"
TIMEOUT_MS = 60_000
START_MS = 1_700_000_000_000
CONFIG = TransactionConfig(
    max_timeout_ms=900_000,
    id_expiration_ms=7 * 24 * 3600 * 1000,
    abort_timed_out_interval_ms=10_000,
    remove_expired_interval_ms=3_600_000,
)
TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
TP2 = TopicPartition("audit", 0)


class CountingAllocator:
    """Producer ids 1000, 1001, ...; ``fail_with`` makes the next call raise that error."""

    def __init__(self, first: int = 1000) -> None:
        self.next_id = first
        self.fail_with: ErrorCode | None = None

    def next_producer_id(self) -> int:
        if self.fail_with is not None:
            raise KafkaError(self.fail_with)
        self.next_id += 1
        return self.next_id - 1


class RecordingTimer:
    def __init__(self) -> None:
        self.deadlines: dict[str, int] = {}

    def schedule(self, key: str, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms

    def cancel(self, key: str) -> None:
        self.deadlines.pop(key, None)

    def deadline(self, key: str) -> int | None:
        return self.deadlines.get(key)


@dataclass
class TxnHarness:
    config: TransactionConfig = CONFIG
    now_ms: int = START_MS
    allocator: CountingAllocator = field(default_factory=CountingAllocator)
    timer: RecordingTimer = field(default_factory=RecordingTimer)
    log: list[TransactionRecord] = field(default_factory=list)
    shard: TransactionCoordinatorShard = field(init=False)

    def __post_init__(self) -> None:
        self.shard = TransactionCoordinatorShard(self.allocator, self.config, self.timer)

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def durable(self, result: TransactionResult) -> TransactionResult:
        """The runtime's part: the records are appended, then on_appended, then the responses go."""
        self.log.extend(result.records)
        self.shard.on_appended(list(result.records))
        return result

    def response(self, result: TransactionResult) -> Any:
        self.durable(result)
        assert len(result.responses) == 1
        return result.responses[0][1]

    def init(self, txn: str = TXN, timeout_ms: int = TIMEOUT_MS, pid: int = -1, epoch: int = -1) -> Any:
        request = InitProducerIdRequest(txn, timeout_ms, pid, epoch)
        return self.response(self.shard.init_producer_id(request, "sink", self.now_ms))

    def add(self, pid: int, epoch: int, *partitions: TopicPartition, txn: str = TXN) -> Any:
        request = AddPartitionsToTxnRequest(txn, pid, epoch, tuple(partitions or (TP0,)))
        return self.response(self.shard.add_partitions(request, "sink", self.now_ms))

    def add_offsets(self, pid: int, epoch: int, group: str, txn: str = TXN) -> Any:
        request = AddOffsetsToTxnRequest(txn, pid, epoch, group)
        return self.response(self.shard.add_offsets(request, "sink", self.now_ms))

    def end_result(self, pid: int, epoch: int, *, commit: bool, txn: str = TXN) -> TransactionResult:
        return self.shard.end_txn(EndTxnRequest(txn, pid, epoch, commit), "sink", self.now_ms)

    def end(self, pid: int, epoch: int, *, commit: bool, txn: str = TXN) -> Any:
        return self.response(self.end_result(pid, epoch, commit=commit, txn=txn))

    def complete(self, txn: str = TXN) -> TransactionResult:
        """Write the markers of ``txn``'s decision: report them written at the current time."""
        metadata = self.meta(txn)
        return self.durable(
            self.shard.markers_written(txn, metadata.producer_id, metadata.producer_epoch, self.now_ms)
        )

    def meta(self, txn: str = TXN) -> TransactionMetadata:
        return self.shard.transactions[txn]

    def begin(self, txn: str = TXN, *partitions: TopicPartition) -> tuple[int, int]:
        """InitProducerId then AddPartitionsToTxn: an Ongoing transaction; its producer id and epoch."""
        response = self.init(txn)
        assert response.error is ErrorCode.none
        assert self.add(response.producer_id, response.producer_epoch, *partitions, txn=txn) is ErrorCode.none
        return response.producer_id, response.producer_epoch

    def replayed(self) -> TransactionCoordinatorShard:
        """A fresh shard that loaded this harness's log."""
        fresh = TransactionCoordinatorShard(CountingAllocator(), self.config, RecordingTimer())
        for offset, record in enumerate(self.log):
            fresh.replay(record, offset, -1, -1)
        return fresh


def durable_view(shard: TransactionCoordinatorShard) -> dict[str, Any]:
    """What a reload must reproduce: every id's durable fields, as record values."""
    return {txn: metadata.to_value() for txn, metadata in shard.transactions.items()}
