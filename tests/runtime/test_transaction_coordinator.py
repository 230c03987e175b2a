"""The transaction coordinator on the generic runtime: decisions, markers after durability, load, timers.

Everything runs through the real :class:`TransactionCoordinator` (its runners, the memory log
store, the timing wheel); the marker writer is a small real class standing for the app's, which
writes data partitions' markers (contract A) and the group coordinator's (contract B).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from kcoord.cluster.producer_id_allocator import ReadyProducerIds
from kcoord.coordinator.partitioner import partition_for
from kcoord.coordinator.transactions import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TopicPartition,
    TransactionConfig,
    TxnMarker,
)
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.storage.api import PartitionLog
from kcoord.storage.memory import MemoryLogStore
from kcoord.timer.clock import SystemClock

OFFSETS_PARTITIONS = 5
TXN_PARTITIONS = 3

Marker = tuple[str, int, int, int, bool]
"""(topic, partition, producer id, producer epoch, committed)."""


class StateTopic:
    """``__transaction_state`` on a memory store."""

    def __init__(self, store: MemoryLogStore) -> None:
        self.store = store

    async def ensure_internal_topic(self, name: str, partitions: int) -> int:
        for partition in range(partitions):
            if self.store.get(name, partition) is None:
                await self.store.create(name, partition)
        return partitions

    def partition_log(self, name: str, partition: int) -> PartitionLog | None:
        return self.store.get(name, partition)


class RecordingMarkers:
    """The marker writer: records each marker written; answers ``failures`` first, if any."""

    def __init__(self, failures: list[ErrorCode] | None = None) -> None:
        self.written: list[Marker] = []
        self.failures = list(failures or [])
        self.calls = 0

    async def write_marker(self, marker: TxnMarker, epoch: int) -> ErrorCode:
        topic, partition = marker.partition.topic, marker.partition.partition
        self.calls += 1
        if self.failures:
            return self.failures.pop(0)
        self.written.append((topic, partition, marker.producer_id, marker.producer_epoch, marker.committed))
        return ErrorCode.none


class Counts:
    """The coordinator's observer: completions and timeouts."""

    def __init__(self) -> None:
        self.completed: list[bool] = []
        self.timed_out = 0

    def transaction_completed(self, committed: bool) -> None:
        self.completed.append(committed)

    def transactions_timed_out(self, count: int) -> None:
        self.timed_out += count


_ids = itertools.count(1000)


async def _next_id() -> int:
    return next(_ids)


@asynccontextmanager
async def coordinator(
    store: MemoryLogStore, markers: RecordingMarkers, counts: Counts | None = None, **config: int
) -> AsyncIterator[TransactionCoordinator]:
    ids = ReadyProducerIds(_next_id)
    service = TransactionCoordinator(
        StateTopic(store),
        SystemClock(),
        ids,
        TransactionConfig(offsets_topic_partitions=OFFSETS_PARTITIONS, **config),
        marker_writer=markers,
        transaction_observer=counts,
        num_partitions=TXN_PARTITIONS,
    )
    ids.start()
    await service.start()
    await asyncio.wait_for(service.loaded.wait(), 5)
    try:
        yield service
    finally:
        await service.stop()
        await ids.stop()


async def init(
    service: TransactionCoordinator, transactional_id: str, timeout_ms: int = 60_000
) -> tuple[int, int]:
    for _ in range(200):
        response = await service.init_producer_id(InitProducerIdRequest(transactional_id, timeout_ms))
        if response.error not in (ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions):
            assert response.error == ErrorCode.none
            return response.producer_id, response.producer_epoch
        await asyncio.sleep(0.01)
    raise AssertionError("InitProducerId never succeeded")


async def eventually(check: Callable[[], bool], what: str, within_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {within_s}s: {what}")
        await asyncio.sleep(0.01)


def state_of(service: TransactionCoordinator, transactional_id: str) -> str:
    return service.describe(transactional_id).state


async def open_store() -> MemoryLogStore:
    store = MemoryLogStore()
    await store.open()
    return store


async def begin(
    service: TransactionCoordinator, transactional_id: str, *partitions: int, group: str = ""
) -> tuple[int, int]:
    producer = await init(service, transactional_id)
    tps = tuple(TopicPartition("t", p) for p in partitions)
    assert (
        await service.add_partitions(AddPartitionsToTxnRequest(transactional_id, *producer, tps))
        == ErrorCode.none
    )
    if group:
        assert (
            await service.add_offsets(AddOffsetsToTxnRequest(transactional_id, *producer, group))
            == ErrorCode.none
        )
    return producer


async def test_a_commit_writes_every_marker_after_the_decision_and_then_completes() -> None:
    """EndTxn answers once PrepareCommit is durable; each data and offsets partition then gets its commit
    marker at the producer's id and epoch, and the transaction ends CompleteCommit (counted)."""
    markers, counts = RecordingMarkers(), Counts()
    async with coordinator(await open_store(), markers, counts) as service:
        producer = await begin(service, "tx-commit", 0, 1, group="g")
        response = await service.end_txn(EndTxnRequest("tx-commit", *producer, committed=True))
        assert response.error == ErrorCode.none
        await eventually(lambda: state_of(service, "tx-commit") == "CompleteCommit", "CompleteCommit")
        offsets_partition = partition_for("g", OFFSETS_PARTITIONS)
        assert sorted(markers.written) == sorted(
            [
                ("t", 0, *producer, True),
                ("t", 1, *producer, True),
                ("__consumer_offsets", offsets_partition, *producer, True),
            ]
        )
        assert counts.completed == [True]


async def test_retriable_marker_errors_are_retried_until_written() -> None:
    """A partition answering NOT_LEADER_OR_FOLLOWER and REQUEST_TIMED_OUT gets its abort marker again, with
    backoff, until it is written; only then does the transaction complete."""
    markers = RecordingMarkers([ErrorCode.not_leader_or_follower, ErrorCode.request_timed_out])
    async with coordinator(await open_store(), markers) as service:
        producer = await begin(service, "tx-retry", 0)
        assert (
            await service.end_txn(EndTxnRequest("tx-retry", *producer, committed=False))
        ).error == ErrorCode.none
        await eventually(lambda: state_of(service, "tx-retry") == "CompleteAbort", "CompleteAbort")
        assert markers.calls == 3 and markers.written == [("t", 0, *producer, False)]
        assert service.markers.retries == 2


async def test_a_superseded_marker_is_dropped_and_the_transaction_completes() -> None:
    """A partition that already saw a newer epoch (INVALID_PRODUCER_EPOCH) ends that marker, as Kafka does."""
    markers = RecordingMarkers([ErrorCode.invalid_producer_epoch])
    async with coordinator(await open_store(), markers) as service:
        producer = await begin(service, "tx-moot", 0)
        await service.end_txn(EndTxnRequest("tx-moot", *producer, committed=True))
        await eventually(lambda: state_of(service, "tx-moot") == "CompleteCommit", "CompleteCommit")
        assert markers.written == []


async def test_a_decision_left_without_markers_is_completed_at_load() -> None:
    """A PrepareCommit whose markers could not be written before the coordinator stopped is reloaded from
    the log, its markers written at load, and the transaction completed."""
    store = await open_store()
    unreachable = RecordingMarkers([ErrorCode.coordinator_not_available] * 10_000)
    async with coordinator(store, unreachable) as service:
        producer = await begin(service, "tx-crash", 0, 2)
        assert (
            await service.end_txn(EndTxnRequest("tx-crash", *producer, committed=True))
        ).error == ErrorCode.none
        await eventually(lambda: unreachable.calls >= 2, "marker attempts")
        assert state_of(service, "tx-crash") == "PrepareCommit"
    markers = RecordingMarkers()
    async with coordinator(store, markers) as reloaded:
        await eventually(
            lambda: state_of(reloaded, "tx-crash") == "CompleteCommit", "CompleteCommit after load"
        )
        assert sorted(markers.written) == [("t", 0, *producer, True), ("t", 2, *producer, True)]


async def test_a_transaction_past_its_timeout_is_aborted_with_a_fencing_epoch() -> None:
    """The periodic scan aborts an Ongoing transaction older than its timeout at a bumped epoch (fencing its
    producer), writes the abort markers at that epoch and counts a timeout and an abort."""
    markers, counts = RecordingMarkers(), Counts()
    async with coordinator(await open_store(), markers, counts, abort_timed_out_interval_ms=20) as service:
        producer_id, epoch = await init(service, "tx-slow", timeout_ms=50)
        await service.add_partitions(
            AddPartitionsToTxnRequest("tx-slow", producer_id, epoch, (TopicPartition("t", 3),))
        )
        await eventually(lambda: state_of(service, "tx-slow") == "CompleteAbort", "aborted on timeout")
        assert markers.written == [("t", 3, producer_id, epoch + 1, False)]
        assert (counts.timed_out, counts.completed) == (1, [False])
        late = await service.end_txn(EndTxnRequest("tx-slow", producer_id, epoch, committed=True))
        assert late.error == ErrorCode.producer_fenced


async def test_produce_verification_answers_by_the_transaction() -> None:
    """Contract C: NONE for a partition in the transaction, INVALID_TXN_STATE for one not added,
    PRODUCER_FENCED for an old epoch, INVALID_PRODUCER_ID_MAPPING for another producer id."""
    async with coordinator(await open_store(), RecordingMarkers()) as service:
        producer_id, epoch = await begin(service, "tx-verify", 0)
        verify: Callable[..., Awaitable[ErrorCode]] = service.verify
        assert await verify("tx-verify", producer_id, epoch, "t", 0) == ErrorCode.none
        assert await verify("tx-verify", producer_id, epoch, "t", 1) == ErrorCode.invalid_txn_state
        assert await verify("tx-verify", producer_id, epoch - 1, "t", 0) == ErrorCode.producer_fenced
        assert (
            await verify("tx-verify", producer_id + 1, epoch, "t", 0) == ErrorCode.invalid_producer_id_mapping
        )


async def test_a_node_without_the_ids_partition_answers_not_coordinator() -> None:
    """In a cluster a node holding none of ``__transaction_state`` answers NOT_COORDINATOR to the client's
    requests, and lets a transactional Produce in unverified (the id's coordinator is another node)."""
    ids = ReadyProducerIds(_next_id)
    service = TransactionCoordinator(
        StateTopic(await open_store()),
        SystemClock(),
        ids,
        TransactionConfig(),
        num_partitions=3,
        owned_only=True,
    )
    await service.start()
    try:
        try:
            await service.init_producer_id(InitProducerIdRequest("elsewhere", 1000))
        except KafkaError as exc:
            assert exc.code == ErrorCode.not_coordinator
        else:
            raise AssertionError("a node without the partition answered InitProducerId")
        assert await service.verify("elsewhere", 1, 0, "t", 0) == ErrorCode.none
    finally:
        await service.stop()


async def test_ready_producer_ids_answer_load_in_progress_until_reserved() -> None:
    """The synchronous allocator refuses (COORDINATOR_LOAD_IN_PROGRESS) before its first ids arrive, then
    hands out distinct ids, refilling in the background."""
    gate = asyncio.Event()
    counter = itertools.count()

    async def slow_source() -> int:
        await gate.wait()
        return next(counter)

    ids = ReadyProducerIds(slow_source, ready=4)
    ids.start()
    try:
        try:
            ids.next_producer_id()
        except KafkaError as exc:
            assert exc.code == ErrorCode.coordinator_load_in_progress
        else:
            raise AssertionError("an id was handed out before any was reserved")
        gate.set()
        await eventually(lambda: ids.ready == 4, "four ids ready")
        handed = [ids.next_producer_id() for _ in range(3)]
        await eventually(lambda: ids.ready == 4, "refilled")
        handed += [ids.next_producer_id() for _ in range(4)]
        assert handed == list(range(7))
    finally:
        await ids.stop()


class GatedMarkers(RecordingMarkers):
    """Marker targets that write nothing until ``gate`` is set (markers still being written)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def write_marker(self, marker: TxnMarker, epoch: int) -> ErrorCode:
        await self.gate.wait()
        return await super().write_marker(marker, epoch)


async def test_an_add_during_the_previous_completion_waits_for_it_instead_of_concurrent_transactions() -> (
    None
):
    """An AddPartitionsToTxn sent right after EndTxn, while the commit's markers are still being written,
    is answered NONE once the markers and CompleteCommit are durable (no CONCURRENT_TRANSACTIONS)."""
    markers, counts = GatedMarkers(), Counts()
    markers.gate.set()
    async with coordinator(await open_store(), markers, counts) as service:
        producer = await begin(service, "tx-next", 0, group="g")
        markers.gate.clear()
        assert (await service.end_txn(EndTxnRequest("tx-next", *producer, committed=True))).error == (
            ErrorCode.none
        )
        add = asyncio.ensure_future(
            service.add_partitions(AddPartitionsToTxnRequest("tx-next", *producer, (TopicPartition("t", 1),)))
        )
        await asyncio.sleep(0.05)
        assert not add.done()
        assert state_of(service, "tx-next") == "PrepareCommit"
        markers.gate.set()
        assert await asyncio.wait_for(add, 5) == ErrorCode.none
        assert counts.completed == [True]
        assert len(markers.written) == 2
        assert state_of(service, "tx-next") == "Ongoing"


async def test_an_add_past_the_bounded_wait_is_answered_concurrent_transactions() -> None:
    """When the previous decision's markers stay unwritten past the bounded wait, the add is answered
    CONCURRENT_TRANSACTIONS (the client retries) and the transaction stays PrepareCommit."""
    markers = GatedMarkers()
    markers.gate.set()
    async with coordinator(await open_store(), markers) as service:
        producer = await begin(service, "tx-stuck", 0)
        markers.gate.clear()
        assert (await service.end_txn(EndTxnRequest("tx-stuck", *producer, committed=True))).error == (
            ErrorCode.none
        )
        error = await asyncio.wait_for(
            service.add_partitions(
                AddPartitionsToTxnRequest("tx-stuck", *producer, (TopicPartition("t", 1),))
            ),
            5,
        )
        assert error == ErrorCode.concurrent_transactions
        assert state_of(service, "tx-stuck") == "PrepareCommit"
        markers.gate.set()
        await eventually(lambda: state_of(service, "tx-stuck") == "CompleteCommit", "CompleteCommit")
