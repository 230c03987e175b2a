"""Open transactions and the aborted index rebuilt at start from the log and its snapshots."""

from __future__ import annotations

from pathlib import Path

from kcoord.cluster.partition_transactions import AbortedTransaction
from kcoord.cluster.producer_snapshots import ProducerSnapshots
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.protocol.control_batch import TRANSACTIONAL_ATTRIBUTE, encode_marker_batch
from kcoord.storage import LogStore, PartitionLog, open_store
from tests.support.batches import build_batch

T0_MS = 1_700_000_000_000


def txn_batch(pid: int, first_sequence: int, count: int = 3, epoch: int = 0) -> bytes:
    records = [(b"k%d" % i, b"v%d" % (first_sequence + i)) for i in range(count)]
    return build_batch(
        records,
        timestamp_ms=T0_MS,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=first_sequence,
        attributes=TRANSACTIONAL_ATTRIBUTE,
    )


def marker(pid: int, committed: bool, epoch: int = 0) -> bytes:
    return encode_marker_batch(pid, epoch, committed, 3, T0_MS).data


async def opened(root: Path) -> LogStore:
    store = open_store(root.as_uri(), retention_check_interval_ms=0)
    await store.open()
    return store


async def restored(data_dir: Path) -> tuple[LogStore, ProducerStateManager, ProducerSnapshots]:
    store = await opened(data_dir / "logs")
    producers = ProducerStateManager(data_dir)
    snapshots = ProducerSnapshots(data_dir, store, producers)
    await snapshots.restore()
    return store, producers, snapshots


async def write(log: PartitionLog, *batches: bytes) -> list[int]:
    return [(await log.append(b)).base_offset for b in batches]


async def test_log_alone_rebuilds_open_and_aborted(tmp_path: Path) -> None:
    """Without a snapshot the scan finds the open transaction (LSO) and the aborted one (index)."""
    store = await opened(tmp_path / "logs")
    log = await store.create("t", 0)
    offsets = await write(
        log,
        txn_batch(1, 0),  # 0-2: producer 1, aborted below
        txn_batch(2, 0),  # 3-5: producer 2, committed below
        marker(1, committed=False),  # 6
        marker(2, committed=True),  # 7
        txn_batch(1, 3),  # 8-10: producer 1's next transaction, still open
    )
    await store.close()

    store, producers, snapshots = await restored(tmp_path)
    end = store.get("t", 0)
    assert end is not None
    assert producers.last_stable_offset("t", 0, end.log_end_offset) == offsets[4] == 8
    assert producers.aborted_between("t", 0, 0, 11) == [AbortedTransaction(1, 0, 6)]
    (view,) = [v for v in producers.describe("t", 0) if v.producer_id == 1]
    assert view.transaction_start_offset == 8
    assert (view.last_timestamp, view.coordinator_epoch) == (T0_MS, 3)
    await snapshots.stop()
    await store.close()


async def test_snapshot_keeps_transactions_across_restarts(tmp_path: Path) -> None:
    """A snapshot taken mid-transaction plus the tail after it gives the same state as the log."""
    store, producers, snapshots = await restored(tmp_path)
    log = await store.create("t", 0)
    await write(log, txn_batch(1, 0), txn_batch(2, 0), marker(2, committed=False))
    assert await snapshots.snapshot_all(max_bytes=None) == 1
    await write(log, txn_batch(3, 0))
    await snapshots.stop()
    await store.close()

    store, producers, snapshots = await restored(tmp_path)
    assert producers.last_stable_offset("t", 0, 100) == 0, "producer 1's transaction is still open"
    assert producers.aborted_between("t", 0, 0, 100) == [AbortedTransaction(2, 3, 6)]
    reopened = store.get("t", 0)
    assert reopened is not None
    await write(reopened, marker(1, committed=True))
    await snapshots.snapshot_all(max_bytes=None)
    await snapshots.stop()
    await store.close()

    store, producers, snapshots = await restored(tmp_path)
    assert producers.last_stable_offset("t", 0, 100) == 7, "producer 3's transaction (offset 7) is open"
    (view,) = [v for v in producers.describe("t", 0) if v.producer_id == 1]
    assert (view.last_timestamp, view.coordinator_epoch) == (T0_MS, 3), "kept by the snapshot"
    await snapshots.stop()
    await store.close()
