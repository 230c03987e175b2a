"""Durability across SIGKILL with log.flush.policy=always, and repair of a torn last batch at start."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.support.batches import build_batch, read_batches
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic, fetch, list_offset, produce
from tests.support.server import KcoordProcess

PARTITIONS = 3
BATCHES = 60
RECORDS_PER_BATCH = 5
TOPIC = "durable"


def produce_acknowledged(server: KcoordProcess) -> dict[int, list[bytes]]:
    """Produce BATCHES batches round-robin over the partitions; return the acknowledged values of each."""
    acknowledged: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with RawClient(server.host, server.port) as client:
        assert create_topic(client, TOPIC, PARTITIONS) == 0
        for n in range(BATCHES):
            partition = n % PARTITIONS
            values = [f"batch-{n}-record-{i}".encode() for i in range(RECORDS_PER_BATCH)]
            batch = build_batch([(b"k", v) for v in values], timestamp_ms=int(time.time() * 1000))
            error, base_offset = produce(client, TOPIC, partition, batch)
            assert error == 0, error
            assert base_offset == len(acknowledged[partition])
            acknowledged[partition].extend(values)
    return acknowledged


def read_partition(client: RawClient, partition: int) -> list[bytes | None]:
    values: list[bytes | None] = []
    while True:
        fetched = fetch(client, TOPIC, partition, len(values))
        assert fetched.error_code == 0, fetched.error_code
        records = [r for b in read_batches(fetched.records) for r in b.records if r.offset >= len(values)]
        if not records:
            return values
        assert [r.offset for r in records] == list(range(len(values), len(values) + len(records)))
        values.extend(r.value for r in records)


def last_segment(server: KcoordProcess, partition: int) -> Path:
    segments = sorted(server.data_dir.rglob(f"{TOPIC}-{partition}/*.log"))
    assert segments, f"no segment files for {TOPIC}-{partition} under {server.data_dir}"
    return segments[-1]


def test_acknowledged_records_survive_sigkill(kcoord_factory: type[KcoordProcess], tmp_path: Path) -> None:
    """Every record acknowledged (acks=all, flush policy always) before SIGKILL is readable after restart."""
    server = kcoord_factory(tmp_path / "data", {"log.flush.policy": "always"}).start()
    acknowledged = produce_acknowledged(server)
    server.kill()
    server.start()
    with RawClient(server.host, server.port) as client:
        for partition, values in acknowledged.items():
            assert list_offset(client, TOPIC, partition) == (0, len(values))
            assert read_partition(client, partition) == values


def test_torn_last_batch_is_cut_at_start(kcoord_factory: type[KcoordProcess], tmp_path: Path) -> None:
    """A segment whose last batch lost its tail is truncated to the batch before it, with a log line."""
    server = kcoord_factory(tmp_path / "data", {"log.flush.policy": "always"}).start()
    acknowledged = produce_acknowledged(server)
    server.kill()
    segment = last_segment(server, 0)
    os.truncate(segment, segment.stat().st_size - 7)
    server.start()

    repaired = server.wait_for_event("log.truncated_torn_tail")
    assert repaired["partition"] == 0
    assert repaired["topic"] == TOPIC
    intact = acknowledged[0][:-RECORDS_PER_BATCH]
    with RawClient(server.host, server.port) as client:
        assert list_offset(client, TOPIC, 0) == (0, len(intact))
        assert read_partition(client, 0) == intact
        for partition in range(1, PARTITIONS):
            assert list_offset(client, TOPIC, partition) == (0, len(acknowledged[partition]))
            assert read_partition(client, partition) == acknowledged[partition]
        after = build_batch([(b"k", b"after-repair")], timestamp_ms=int(time.time() * 1000))
        assert produce(client, TOPIC, 0, after) == (0, len(intact))
        assert read_partition(client, 0) == [*intact, b"after-repair"]
