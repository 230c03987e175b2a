"""Producer state rebuilt at start from the log tail after the last snapshot: retries across a
restart are duplicates, and a snapshot that does not fit the log is not trusted."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from kcoord.cluster.producer_snapshots import SNAPSHOT_DIR, PartitionScan, ProducerSnapshots
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import parse_header
from kcoord.storage import LogStore, PartitionLog, open_store
from tests.support.batches import build_batch

PID = 7
T0_MS = 1_700_000_000_000


def batch(first_sequence: int, count: int = 5, epoch: int = 0, pid: int = PID) -> bytes:
    records = [(None, b"v%d" % (first_sequence + i)) for i in range(count)]
    return build_batch(
        records, timestamp_ms=T0_MS, producer_id=pid, producer_epoch=epoch, base_sequence=first_sequence
    )


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


async def append_all(log: PartitionLog, *batches: bytes) -> list[int]:
    return [(await log.append(b)).base_offset for b in batches]


def check(producers: ProducerStateManager, first_sequence: int, count: int = 5, epoch: int = 0) -> int:
    """-1 for a new batch accepted, else the offset of the stored batch it repeats."""
    slot = producers.check_and_record("t", 0, PID, epoch, first_sequence, count)
    return slot.repeats.base_offset if slot.repeats is not None else -1


async def test_retry_after_restart_is_a_duplicate(tmp_path: Path) -> None:
    """Rebuilt from the log alone, a retried batch answers with its stored offset; the next is in order."""
    store = await opened(tmp_path / "logs")
    log = await store.create("t", 0)
    offsets = await append_all(log, batch(0), batch(5), batch(10))
    await store.close()

    store, producers, snapshots = await restored(tmp_path)
    assert check(producers, 10) == offsets[2]
    assert check(producers, 5) == offsets[1]
    with pytest.raises(KafkaError) as caught:
        check(producers, 20)
    assert caught.value.code == ErrorCode.out_of_order_sequence_number
    assert check(producers, 15) == -1
    await snapshots.stop()
    await store.close()


async def test_snapshot_then_tail(tmp_path: Path) -> None:
    """The snapshot holds the state up to its offset; batches after it are read from the log tail."""
    store, producers, snapshots = await restored(tmp_path)
    log = await store.create("t", 0)
    await append_all(log, batch(0), batch(5))
    assert await snapshots.snapshot_all(max_bytes=None) == 1
    saved = json.loads((tmp_path / SNAPSHOT_DIR / "t-0.json").read_bytes())
    assert saved["offset"] == 10
    tail = await append_all(log, batch(10), batch(0, epoch=1, pid=PID + 1))
    await store.close()  # a crash would leave the same files: the snapshot stays at offset 10

    store, producers, snapshots = await restored(tmp_path)
    assert check(producers, 10) == tail[0]
    assert producers.check_and_record("t", 0, PID + 1, 1, 0, 5).repeats is not None
    assert await producers.init_producer(PID + 1, 1) == (PID + 1, 2), "the restored epoch can be bumped"
    await snapshots.stop()
    await store.close()


async def test_snapshot_past_the_log_end_is_ignored(tmp_path: Path) -> None:
    """A snapshot claiming offsets the log does not hold is dropped and the log is scanned from its start."""
    store = await opened(tmp_path / "logs")
    log = await store.create("t", 0)
    offsets = await append_all(log, batch(0))
    await store.close()
    (tmp_path / SNAPSHOT_DIR).mkdir()
    bogus = {"version": 1, "offset": 1000, "producers": [[PID, 0, [[0, 99, 900, -1]]]]}
    (tmp_path / SNAPSHOT_DIR / "t-0.json").write_text(json.dumps(bogus))

    with capture_logs() as logs:
        store, producers, snapshots = await restored(tmp_path)
    assert "producer_snapshot.past_log_end" in [e["event"] for e in logs]
    assert check(producers, 0) == offsets[0]
    await snapshots.stop()
    await store.close()


def test_rescanning_a_batch_changes_nothing() -> None:
    """A batch at or below a producer's newest known offset is skipped, so overlapping scans are harmless."""
    scan = PartitionScan()
    first = replace(parse_header(batch(0)), base_offset=0)
    second = replace(parse_header(batch(5)), base_offset=5)
    for header in (first, second, first, second):
        scan.apply(header)
    stored = scan.producers[PID]
    assert [(b.first_sequence, b.last_sequence, b.base_offset) for b in stored.batches] == [
        (0, 4, 0),
        (5, 9, 5),
    ]


async def test_snapshot_of_a_partition_gone_is_removed(tmp_path: Path) -> None:
    """A snapshot whose partition no longer exists (its topic was deleted) is removed at start."""
    (tmp_path / SNAPSHOT_DIR).mkdir(parents=True)
    orphan = tmp_path / SNAPSHOT_DIR / "gone-0.json"
    orphan.write_text(json.dumps({"version": 1, "offset": 0, "producers": []}))
    store, _, snapshots = await restored(tmp_path)
    assert not orphan.exists()
    await snapshots.stop()
    await store.close()
