"""ProducerStateManager: id blocks that survive restarts, epochs and sequence rules."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kcoord.cluster.producer_state import (
    ID_BLOCK_FILE,
    PRODUCER_EXPIRATION_MS,
    ProducerStateManager,
    StoredBatch,
    StoredProducer,
)
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.timer.clock import ManualClock


async def test_ids_are_unique_across_restarts(tmp_path: Path) -> None:
    """A restarted manager never hands out an id given before, even from a partly used block."""
    first = ProducerStateManager(tmp_path, id_block_size=10)
    before = {(await first.init_producer())[0] for _ in range(13)}
    second = ProducerStateManager(tmp_path, id_block_size=10)
    after = {(await second.init_producer())[0] for _ in range(5)}
    assert len(before) == 13
    assert not before & after
    assert int((tmp_path / ID_BLOCK_FILE).read_text()) == 30


async def test_reinit_with_current_epoch_bumps_it(tmp_path: Path) -> None:
    """KIP-360: re-init with the current id and epoch bumps the epoch; a stale epoch gets a new id."""
    manager = ProducerStateManager(tmp_path)
    pid, epoch = await manager.init_producer()
    assert await manager.init_producer(pid, epoch) == (pid, epoch + 1)
    new_pid, new_epoch = await manager.init_producer(pid, epoch)
    assert new_pid != pid and new_epoch == 0


async def test_unknown_id_reinit_gets_new_id(tmp_path: Path) -> None:
    """An id the manager did not issue since it started (e.g. before a restart) gets a fresh id."""
    manager = ProducerStateManager(tmp_path)
    pid, epoch = await manager.init_producer(12345, 3)
    assert pid != 12345 and epoch == 0


def test_sequence_rules(tmp_path: Path) -> None:
    """Next sequence is accepted, a gap is OUT_OF_ORDER, an old epoch INVALID_PRODUCER_EPOCH."""
    manager = ProducerStateManager(tmp_path)
    manager.check_and_record("t", 0, 1, 0, 0, 5).complete(0, -1)
    manager.check_and_record("t", 0, 1, 0, 5, 1).complete(5, -1)
    with pytest.raises(KafkaError) as gap:
        manager.check_and_record("t", 0, 1, 0, 9, 1)
    assert gap.value.code == ErrorCode.out_of_order_sequence_number
    with pytest.raises(KafkaError) as new_epoch_gap:
        manager.check_and_record("t", 0, 1, 1, 3, 1)
    assert new_epoch_gap.value.code == ErrorCode.out_of_order_sequence_number
    manager.check_and_record("t", 0, 1, 1, 0, 1).complete(6, -1)
    with pytest.raises(KafkaError) as fenced:
        manager.check_and_record("t", 0, 1, 0, 6, 1)
    assert fenced.value.code == ErrorCode.invalid_producer_epoch


def test_sequence_wraps_at_int32_max(tmp_path: Path) -> None:
    """After sequence 2**31-1 the next batch starts at 0."""
    manager = ProducerStateManager(tmp_path)
    manager.check_and_record("t", 0, 1, 0, 2**31 - 2, 2).complete(0, -1)
    assert not manager.check_and_record("t", 0, 1, 0, 0, 1).duplicate


async def test_duplicate_of_one_of_the_last_five(tmp_path: Path) -> None:
    """Any of the last five batches is recognised as a duplicate; older ones are out of order."""
    manager = ProducerStateManager(tmp_path)
    for i in range(6):
        manager.check_and_record("t", 0, 1, 0, i, 1).complete(100 + i, -1)
    dup = manager.check_and_record("t", 0, 1, 0, 2, 1)
    assert dup.duplicate
    assert await dup.original() == (102, -1)
    with pytest.raises(KafkaError):
        manager.check_and_record("t", 0, 1, 0, 0, 1)


async def test_duplicate_of_pending_append_waits_for_it(tmp_path: Path) -> None:
    """A duplicate of a batch still being appended answers once the original has its offset."""
    manager = ProducerStateManager(tmp_path)
    original = manager.check_and_record("t", 0, 1, 0, 0, 1)
    dup = manager.check_and_record("t", 0, 1, 0, 0, 1)
    waiting = asyncio.ensure_future(dup.original())
    await asyncio.sleep(0)
    assert not waiting.done()
    original.complete(40, 1234)
    assert await waiting == (40, 1234)


def test_failed_append_can_be_retried(tmp_path: Path) -> None:
    """Forgetting a failed batch restores the expected sequence so the retry is not out of order."""
    manager = ProducerStateManager(tmp_path)
    manager.check_and_record("t", 0, 1, 0, 0, 1).complete(0, -1)
    slot = manager.check_and_record("t", 0, 1, 0, 1, 3)
    manager.forget("t", 0, 1, slot, OSError("disk"))
    retry = manager.check_and_record("t", 0, 1, 0, 1, 3)
    assert not retry.duplicate


def test_partitions_are_independent(tmp_path: Path) -> None:
    """Sequences are tracked per partition of each producer."""
    manager = ProducerStateManager(tmp_path)
    manager.check_and_record("t", 0, 1, 0, 0, 3).complete(0, -1)
    assert not manager.check_and_record("t", 1, 1, 0, 0, 1).duplicate
    assert manager.producer_count() == 1


def test_gated_partition_refuses_idempotent_batches_until_restored(tmp_path: Path) -> None:
    """In a cluster a partition's idempotent batches get NOT_LEADER_OR_FOLLOWER until its state is
    loaded, and again once it is dropped (its state goes with it)."""
    manager = ProducerStateManager(tmp_path, gated=True)
    with pytest.raises(KafkaError) as loading:
        manager.check_and_record("t", 0, 1, 0, 0, 1)
    assert loading.value.code == ErrorCode.not_leader_or_follower
    manager.restore("t", 0, {1: StoredProducer(0, [StoredBatch(0, 4, 70, -1)])})
    assert manager.check_and_record("t", 0, 1, 0, 0, 5).duplicate
    assert manager.drop_partition("t", 0) == 1
    assert not manager.is_open("t", 0)
    with pytest.raises(KafkaError) as dropped:
        manager.check_and_record("t", 0, 1, 0, 5, 1)
    assert dropped.value.code == ErrorCode.not_leader_or_follower
    assert manager.producer_count() == 0


class _FailingReservations:
    async def reserve(self, size: int) -> int:
        raise OSError("database unreachable")


async def test_failed_reservation_is_retriable(tmp_path: Path) -> None:
    """A block that cannot be reserved answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry."""
    manager = ProducerStateManager(tmp_path, reservations=_FailingReservations())
    with pytest.raises(KafkaError) as caught:
        await manager.init_producer()
    assert caught.value.code == ErrorCode.coordinator_load_in_progress


async def test_concurrent_inits_share_one_reservation(tmp_path: Path) -> None:
    """Inits that arrive while a block is being reserved wait for it and get distinct ids."""
    manager = ProducerStateManager(tmp_path, id_block_size=4)
    ids = await asyncio.gather(*(manager.init_producer() for _ in range(10)))
    assert len({pid for pid, _ in ids}) == 10
    assert int((tmp_path / ID_BLOCK_FILE).read_text()) == 12


async def test_a_producer_unseen_for_the_expiration_time_is_forgotten(tmp_path: Path) -> None:
    """On the injected clock, a producer idle past producer.id.expiration.ms loses its state; one
    seen within it keeps it."""
    clock = ManualClock(1_000_000)
    manager = ProducerStateManager(tmp_path, clock=clock)
    manager.check_and_record("t", 0, 1, 0, 0, 5).complete(0, -1)
    clock.advance(PRODUCER_EXPIRATION_MS // 2)
    manager.check_and_record("t", 0, 2, 0, 0, 5).complete(5, -1)
    await manager.init_producer()
    assert manager.producer_count() == 2
    clock.advance(PRODUCER_EXPIRATION_MS // 2 + 1)
    await manager.init_producer()
    assert manager.producer_count() == 1
    manager.check_and_record("t", 0, 1, 0, 40, 1).complete(10, -1)


def test_transaction_opens_and_marker_ends_it(tmp_path: Path) -> None:
    """A transactional batch holds the LSO at its offset until the marker; an abort enters the index."""
    manager = ProducerStateManager(tmp_path)
    manager.check_and_record("t", 0, 9, 0, 0, 2, 1234)
    assert manager.begin_transaction("t", 0, 9, 5)
    manager.settle_transaction_start("t", 0, 9, 5, 6)
    assert manager.last_stable_offset("t", 0, 8) == 6
    assert manager.last_stable_offset("t", 1, 8) == 8, "other partitions are not held back"
    (view,) = manager.describe("t", 0)
    assert (view.producer_id, view.epoch, view.last_sequence, view.last_timestamp) == (9, 0, 1, 1234)
    assert view.transaction_start_offset == 6
    manager.end_transaction("t", 0, 9, 0, 4, 8, committed=False)
    assert manager.last_stable_offset("t", 0, 9) == 9
    assert [
        (a.producer_id, a.first_offset, a.last_offset) for a in manager.aborted_between("t", 0, 0, 9)
    ] == [(9, 6, 8)]
    (view,) = manager.describe("t", 0)
    assert (view.coordinator_epoch, view.transaction_start_offset) == (4, -1)


def test_marker_epoch_rules(tmp_path: Path) -> None:
    """An older marker epoch is INVALID_PRODUCER_EPOCH; a newer one becomes the epoch, sequences restart."""
    manager = ProducerStateManager(tmp_path)
    manager.check_and_record("t", 0, 9, 2, 0, 3)
    with pytest.raises(KafkaError) as raised:
        manager.check_marker("t", 0, 9, 1)
    assert raised.value.code == ErrorCode.invalid_producer_epoch
    manager.check_marker("t", 0, 9, 3)
    manager.end_transaction("t", 0, 9, 3, 0, 3, committed=False)
    with pytest.raises(KafkaError) as stale:
        manager.check_and_record("t", 0, 9, 2, 3, 1)
    assert stale.value.code == ErrorCode.invalid_producer_epoch
    manager.check_and_record("t", 0, 9, 3, 0, 1)


def test_gated_marker_waits_for_the_state(tmp_path: Path) -> None:
    """In a cluster a marker for a partition whose state is not loaded is NOT_LEADER_OR_FOLLOWER."""
    manager = ProducerStateManager(tmp_path, gated=True)
    with pytest.raises(KafkaError) as raised:
        manager.check_marker("t", 0, 9, 0)
    assert raised.value.code == ErrorCode.not_leader_or_follower
    manager.restore("t", 0, {})
    manager.check_marker("t", 0, 9, 0)


def test_marker_from_an_older_coordinator_epoch_is_fenced(tmp_path: Path) -> None:
    """A marker from a coordinator epoch below the last marker's is TRANSACTION_COORDINATOR_FENCED."""
    manager = ProducerStateManager(tmp_path)
    manager.check_and_record("t", 0, 9, 0, 0, 1)
    manager.end_transaction("t", 0, 9, 0, 5, 1, committed=True)
    with pytest.raises(KafkaError) as raised:
        manager.check_marker("t", 0, 9, 0, 4)
    assert raised.value.code == ErrorCode.transaction_coordinator_fenced
    manager.check_marker("t", 0, 9, 0, 5)


def test_a_fencing_marker_fences_the_old_epoch_before_it_lands(tmp_path: Path) -> None:
    """A newer-epoch marker whose append has only started already refuses the old epoch's batches."""
    manager = ProducerStateManager(tmp_path)
    manager.check_and_record("t", 0, 9, 0, 0, 1)
    manager.check_marker("t", 0, 9, 1)
    with pytest.raises(KafkaError) as raised:
        manager.check_and_record("t", 0, 9, 0, 1, 1)
    assert raised.value.code == ErrorCode.invalid_producer_epoch
