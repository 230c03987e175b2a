"""The runner's producer batches: a transactional operation's records and a transaction's end marker.

Each goes to the log as a batch of its own with the producer's id and epoch, after whatever the
partition has waiting, and reaches the shard only once durable (records through ``replay`` with the
producer, markers through ``replay_end_transaction_marker``); failures and timeouts answer as the
plain path's do. A fake log in a list holds, gates and fails the appends; a fake shard records what
it is handed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.control_batch import ControlRecord, read_control_record
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.plain_batch import iter_plain_records
from kcoord.protocol.record_batch import parse_header
from kcoord.runtime.runner import PartitionState, Sink
from tests.runtime.test_runner import FakeLog, FakeShard, loaded_runner, offset_record
from tests.runtime.test_runtime_failures import runner_with_factory, wait_for_state

PRODUCER_ID, EPOCH = 900, 4


def batch_kinds(log: FakeLog) -> list[tuple[bool, bool, int, int]]:
    """(transactional, control, producer id, producer epoch) of each batch of the log, in order."""
    kinds = []
    for _, data in log.batches:
        header = parse_header(data)
        kinds.append((header.is_transactional, header.is_control, header.producer_id, header.producer_epoch))
    return kinds


def committing(records: list[Any], answer: Any) -> Any:
    """An operation returning ``records`` and ``answer`` for its sink."""

    def operation(shard: FakeShard, sink: Sink, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult(records=list(records), responses=[(sink, answer)])

    return operation


async def test_transactional_records_follow_the_waiting_batch_and_are_replayed_with_their_producer() -> None:
    """A plain result submitted first is appended first; the transactional one is its own batch of the
    producer, replayed (not on_appended) with the producer once durable, then answered."""
    runner, shard, log = await loaded_runner()
    plain, txn = Sink(), Sink()
    runner.run(
        lambda now: CoordinatorResult(records=[offset_record("g", 0, 1)], responses=[(plain, "plain")])
    )
    runner.run_transactional(committing([offset_record("g", 1, 2)], "txn"), txn, PRODUCER_ID, EPOCH)
    assert not txn.done() and shard.replayed == []
    assert await asyncio.wait_for(txn, 1) == "txn"
    assert await asyncio.wait_for(plain, 1) == "plain"
    assert batch_kinds(log) == [(False, False, -1, -1), (True, False, PRODUCER_ID, EPOCH)]
    assert shard.appended == [[offset_record("g", 0, 1)]]
    assert shard.replayed == [offset_record("g", 1, 2)]
    assert shard.replayed_at == [(-1, PRODUCER_ID, EPOCH)]


async def test_a_transactional_operation_without_records_is_answered_at_once() -> None:
    """An operation that writes nothing (every partition refused) answers without touching the log."""
    runner, _, log = await loaded_runner()
    sink = Sink()
    runner.run_transactional(committing([], "refused"), sink, PRODUCER_ID, EPOCH)
    assert await asyncio.wait_for(sink, 1) == "refused"
    assert log.batches == []


async def test_a_marker_is_a_control_batch_of_the_producer_applied_once_durable() -> None:
    """write_marker appends the producer's control batch (commit, coordinator epoch) after the waiting
    batch; the shard gets the marker only once it is durable, and the sink NONE."""
    runner, shard, log = await loaded_runner()
    log.gate = asyncio.Event()
    plain, marker = Sink(), Sink()
    runner.run(
        lambda now: CoordinatorResult(records=[offset_record("g", 0, 1)], responses=[(plain, "plain")])
    )
    runner.write_marker(marker, PRODUCER_ID, EPOCH, True, 11)
    await asyncio.sleep(0.01)
    assert shard.markers == [] and not marker.done(), "nothing applied before the marker is durable"
    log.gate.set()
    assert await asyncio.wait_for(marker, 1) == ErrorCode.none
    assert shard.markers == [(PRODUCER_ID, EPOCH, True)]
    assert batch_kinds(log) == [(False, False, -1, -1), (True, True, PRODUCER_ID, EPOCH)]
    _, data = log.batches[-1]
    assert [read_control_record(k, v) for _, k, v in iter_plain_records(data, 0)] == [ControlRecord(True, 11)]


async def test_a_failed_producer_batch_answers_not_coordinator_and_reloads_from_the_log() -> None:
    """A transactional batch and a marker whose appends fail are answered NOT_COORDINATOR, never reach
    the shard, and the partition reloads from its log (where they are not)."""
    log = FakeLog()
    runner, shards, observer = runner_with_factory(log)
    await runner.load()
    log.fail_with = OSError("disk full")
    txn, marker = Sink(), Sink()
    runner.run_transactional(committing([offset_record("g", 1, 2)], "txn"), txn, PRODUCER_ID, EPOCH)
    runner.write_marker(marker, PRODUCER_ID, EPOCH, False, 0)
    for sink in (txn, marker):
        with pytest.raises(KafkaError) as raised:
            await asyncio.wait_for(sink, 1)
        assert raised.value.code == ErrorCode.not_coordinator
    assert observer.append_failures == [3]
    assert shards[0].replayed == [] and shards[0].markers == []
    log.fail_with = None
    await wait_for_state(runner, PartitionState.ACTIVE)
    assert len(shards) == 2 and shards[1].replayed == [] and shards[1].markers == []


async def test_a_slow_marker_times_out_and_still_counts_when_it_lands() -> None:
    """A marker not durable within the commit timeout answers REQUEST_TIMED_OUT (the transaction
    coordinator retries); once it lands the shard still applies it."""
    log = FakeLog()
    runner, shards, _ = runner_with_factory(log, append_timeout_ms=20)
    await runner.load()
    log.gate = asyncio.Event()
    marker = Sink()
    runner.write_marker(marker, PRODUCER_ID, EPOCH, True, 0)
    with pytest.raises(KafkaError) as raised:
        await asyncio.wait_for(marker, 1)
    assert raised.value.code == ErrorCode.request_timed_out
    log.gate.set()
    await runner.close()
    assert shards[0].markers == [(PRODUCER_ID, EPOCH, True)]


async def test_after_writes_answers_once_every_submitted_batch_is_durable() -> None:
    """A reader riding on the partition's writes is answered after the newest batch is durable, and at
    once when nothing is waiting."""
    runner, _, log = await loaded_runner()
    idle = Sink()
    assert not runner.writes_waiting()
    runner.after_writes(idle)
    assert idle.done() and idle.result() is None
    log.gate = asyncio.Event()
    plain, txn, reader = Sink(), Sink(), Sink()
    runner.run(lambda now: CoordinatorResult(records=[offset_record("g", 0, 1)], responses=[(plain, 1)]))
    runner.run_transactional(committing([offset_record("g", 1, 2)], 2), txn, PRODUCER_ID, EPOCH)
    assert runner.writes_waiting()
    runner.after_writes(reader)
    await asyncio.sleep(0.01)
    assert not reader.done()
    log.gate.set()
    assert await asyncio.wait_for(reader, 1) is None
    assert txn.done() and plain.done()
