"""Idempotent producers across a three-node cluster on a real PostgreSQL.

- A confluent-kafka idempotent producer (acks=all) storms a topic whose partitions are spread over
  the three nodes; the node leading some of them is SIGKILLed mid-storm. Its survivors claim those
  partitions after its lease and rebuild their producer state (snapshot in the database + log
  tail) before accepting idempotent batches, so the producer's retries of batches the dead node
  had stored are answered as duplicates: every acknowledged record is stored exactly once, in order.
- InitProducerId on different nodes gives distinct producer ids, and a producer whose next
  InitProducerId (KIP-360, naming its id and epoch) lands on another node keeps producing.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.batches import build_batch
from tests.support.cluster_nodes import call, start_nodes, wait_converged, wait_until
from tests.support.cluster_nodes import owners as partition_owners
from tests.support.confluent_ops import consume_all
from tests.support.idempotent_storm import Storm, count_stored
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic, produce
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

PARTITIONS = 6
RECORDS = 40_000
KILL_AFTER_ACKS = 8_000
STORM_DEADLINE_S = 120.0
LEASE_S = 6.0


def stored_records(postgres: PostgresCluster, database: str, topic: str) -> int:
    """Records the database holds for ``topic`` (from the batch rows' offset ranges)."""
    total = postgres.sql(
        database,
        f"SELECT coalesce(sum(last_offset - base_offset + 1), 0) FROM log_batches WHERE topic = '{topic}'",
    )
    return int(total.strip())


def failover_seconds(storm: Storm, moved: set[int], killed_at: float) -> float:
    """From the kill to the first acknowledgement of a moved partition after their longest silence
    (acknowledgements already on their way when the node died arrive just after the kill)."""
    times = sorted(ack.at for ack in storm.acked.values() if ack.partition in moved)
    gaps = [(later - earlier, later) for earlier, later in itertools.pairwise(times) if later > killed_at]
    return max(gaps)[1] - killed_at if gaps else float("nan")


def spread_topic(
    nodes: list[KcoordProcess], postgres: PostgresCluster, database: str, topic: str
) -> dict[int, int | None]:
    with RawClient(nodes[0].host, nodes[0].port) as raw:
        assert create_topic(raw, topic, PARTITIONS) == 0
    even = {int(node.settings["node.id"]): PARTITIONS // len(nodes) for node in nodes}
    settled: list[dict[int, int | None]] = []

    def spread_and_settled() -> bool:
        """Evenly spread, and unchanged since the last look a renewal ago (no claim in flux)."""
        current = partition_owners(postgres, database, topic)
        previous = settled[-1] if settled else None
        settled.append(current)
        if Counter(current.values()) != even or current != previous:
            time.sleep(1.2)
            return False
        return True

    wait_until(spread_and_settled, 30, f"{topic} spread")
    return settled[-1]


@pytest.mark.parametrize(("run", "stop"), [(1, "kill"), (2, "kill"), (3, "kill"), (4, "terminate")])
@pytest.mark.slow
def test_sigkill_of_a_leader_mid_storm_stores_every_acknowledged_record_once(
    kcoord_factory: type[KcoordProcess],
    tmp_path: Path,
    postgres_cluster: PostgresCluster,
    run: int,
    stop: str,
) -> None:
    """Kill the node leading some partitions mid-storm (or, once, stop it cleanly: it hands them over
    at once): after failover, stored == acknowledged == sent, no duplicates, no loss, each partition
    in order; the moved partitions' producer state was loaded by their new owners."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3)
    wait_converged(nodes, postgres_cluster, database)
    topic = f"idempotent-cluster-{run}"
    owners = spread_topic(nodes, postgres_cluster, database, topic)
    victim = nodes[0]
    moved = {p for p, owner in owners.items() if owner == 1}
    assert moved, owners

    storm = Storm(",".join(node.bootstrap for node in nodes), topic, RECORDS, STORM_DEADLINE_S)
    storm.thread.start()
    storm.wait_acked(KILL_AFTER_ACKS, timeout=60)
    killed_at, killed_wall = time.monotonic(), datetime.now(UTC)
    if stop == "kill":
        victim.kill()
    else:
        victim.terminate()
    storm.thread.join(STORM_DEADLINE_S + 30)
    assert not storm.thread.is_alive(), "the producer did not finish"

    after = [ack.at for ack in storm.acked.values() if ack.partition in moved and ack.at > killed_at]
    failover_s = failover_seconds(storm, moved, killed_at)
    survivors = nodes[1:]
    stored_total = stored_records(postgres_cluster, database, topic)
    stored = consume_all(",".join(n.bootstrap for n in survivors), topic, stored_total, PARTITIONS)
    count = count_stored(storm, stored)
    # Only the loads after the kill are the failover's: a survivor may also have held a partition
    # (and loaded its then empty state) before the spread settled on the victim.
    loads = [
        event
        for node in survivors
        for event in node.events("producer_state.loaded")
        if event.get("topic") == topic
        and event.get("partition") in moved
        and datetime.fromisoformat(str(event["timestamp"])) >= killed_wall
    ]
    load_figures = [
        (e["partition"], e["producers"], e["snapshot_offset"], e["log_end_offset"], e["load_ms"])
        for e in loads
    ]
    retried = [
        event
        for node in survivors
        for event in node.events("produce.duplicate_answered")
        if event.get("topic") == topic and event.get("partition") in moved
    ]
    print(
        f"run {run} ({stop}): sent {RECORDS}, acknowledged {count.acknowledged}, stored {stored_total}"
        f" (read back {count.stored}), duplicates {count.duplicates}, lost {count.lost},"
        f" partitions out of order {count.out_of_order}, delivery errors {len(storm.errors)},"
        f" failover {failover_s:.2f} s (first ack on a moved partition after the kill),"
        " producer state loads after the kill (partition, producers, snapshot offset, log end, ms)"
        f" {load_figures},"
        f" retries of the dead node's stored batches answered as duplicates {len(retried)}"
    )
    assert count.stored == stored_total
    assert count.lost == 0, f"{count.lost} acknowledged records lost"
    assert count.duplicates == 0, f"{count.duplicates} records stored twice"
    assert count.out_of_order == 0
    assert count.acknowledged == RECORDS == stored_total, f"not all acknowledged: {storm.errors[:5]}"
    assert after, "nothing was acknowledged on the moved partitions after the kill"
    assert {e["partition"] for e in loads} >= moved, "a survivor served a moved partition unloaded"
    assert all(e["producers"] >= 1 for e in loads), f"a moved partition's producer state was lost: {loads}"


def init_producer(node: KcoordProcess, producer_id: int = -1, epoch: int = -1) -> tuple[int, int, int]:
    """InitProducerId v4 at ``node``: (error code, producer id, epoch)."""
    body = {
        "transactional_id": None,
        "transaction_timeout_ms": 60_000,
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }
    answer = call(node, ApiKey.INIT_PRODUCER_ID, 4, body)
    return int(answer.error_code), int(answer.producer_id), int(answer.producer_epoch)


def produce_at_leader(
    leader: KcoordProcess, topic: str, partition: int, pid: int, epoch: int, sequence: int
) -> int:
    batch = build_batch(
        [(None, b"x")],
        timestamp_ms=1_700_000_000_000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    with RawClient(leader.host, leader.port) as raw:
        error, _ = produce(raw, topic, partition, batch)
    return error


def test_producer_ids_are_distinct_across_nodes_and_reinit_lands_anywhere(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """InitProducerId on each of three nodes, interleaved, gives distinct ids; a KIP-360 re-init
    naming an id issued elsewhere gets a fresh id at epoch 0, one at the issuing node a bumped
    epoch, and either is accepted from sequence 0 on a partition a third node leads, while the
    superseded epoch is fenced."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3)
    wait_converged(nodes, postgres_cluster, database)
    issued = [init_producer(node) for _ in range(20) for node in nodes]
    assert all(error == ErrorCode.none and epoch == 0 for error, _, epoch in issued)
    ids = [pid for _, pid, _ in issued]
    assert len(set(ids)) == len(ids) == 60
    print(f"60 InitProducerId over 3 nodes: 60 distinct ids, {min(ids)}..{max(ids)}")

    owners = spread_topic(nodes, postgres_cluster, database, "reinit")
    partition = next(p for p, owner in owners.items() if owner == 3)
    leader = nodes[2]
    error, pid, epoch = init_producer(nodes[0])
    assert error == ErrorCode.none
    assert produce_at_leader(leader, "reinit", partition, pid, epoch, 0) == ErrorCode.none

    error, elsewhere, elsewhere_epoch = init_producer(nodes[1], pid, epoch)
    assert error == ErrorCode.none and elsewhere != pid and elsewhere_epoch == 0
    assert produce_at_leader(leader, "reinit", partition, elsewhere, 0, 0) == ErrorCode.none

    error, same, bumped = init_producer(nodes[0], pid, epoch)
    assert (error, same, bumped) == (ErrorCode.none, pid, epoch + 1)
    assert produce_at_leader(leader, "reinit", partition, pid, bumped, 0) == ErrorCode.none
    assert produce_at_leader(leader, "reinit", partition, pid, epoch, 1) == ErrorCode.invalid_producer_epoch
