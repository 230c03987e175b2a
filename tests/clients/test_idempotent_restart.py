"""SIGKILL during an idempotent confluent-kafka produce storm, restart on the same data directory and
port: every acknowledged record is stored, and no record is stored twice (retries spanning the
restart are recognised as duplicates from the producer state rebuilt at start)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.confluent_ops import consume_all, create_topic
from tests.support.idempotent_storm import Storm
from tests.support.raw_client import RawClient
from tests.support.raw_ops import list_offset
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

PARTITIONS = 3
RECORDS = 120_000
KILL_AFTER_ACKS = 20_000
STORM_DEADLINE_S = 120.0


def log_end_offsets(server: KcoordProcess, topic: str) -> list[int]:
    with RawClient(server.host, server.port) as client:
        answers = [list_offset(client, topic, p) for p in range(PARTITIONS)]
    assert all(error == 0 for error, _ in answers), answers
    return [offset for _, offset in answers]


@pytest.mark.parametrize("run", [1, 2, 3])
def test_sigkill_during_idempotent_storm_loses_and_repeats_nothing(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, run: int
) -> None:
    """Acknowledged records all read back after SIGKILL + restart, and every stored record is unique."""
    server = kcoord_factory(tmp_path / "data").start()
    topic = f"idempotent-storm-{run}"
    create_topic(server.bootstrap, topic, PARTITIONS)
    storm = Storm(server.bootstrap, topic, RECORDS, STORM_DEADLINE_S, keys=None)
    storm.thread.start()
    waited_until = time.monotonic() + 60
    while storm.acked_count() < KILL_AFTER_ACKS and time.monotonic() < waited_until:
        time.sleep(0.01)
    assert storm.acked_count() >= KILL_AFTER_ACKS, "the storm did not get going"
    server.restart()
    storm.thread.join(STORM_DEADLINE_S + 30)
    assert not storm.thread.is_alive(), "the producer did not finish"

    stored_total = sum(log_end_offsets(server, topic))
    stored = Counter(c.value for c in consume_all(server.bootstrap, topic, stored_total, PARTITIONS))
    duplicates = sum(count - 1 for count in stored.values() if count > 1)
    lost = set(storm.acked) - set(stored)
    print(
        f"run {run}: acknowledged {len(storm.acked)}, stored {stored_total}, "
        f"duplicates {duplicates}, lost {len(lost)}, delivery errors {len(storm.errors)}"
    )
    assert sum(stored.values()) == stored_total
    assert not lost, f"{len(lost)} acknowledged records lost"
    assert duplicates == 0, f"{duplicates} records stored twice"
    assert len(storm.acked) == RECORDS, f"not every record was acknowledged: {storm.errors[:5]}"
