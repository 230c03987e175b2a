"""Leader epochs across a failover (KIP-320): SIGKILL the node that coordinates a consuming group and
leads some of its partitions in a three-node cluster. The survivors claim its partitions under new
owner epochs, Metadata reports them, and a librdkafka consumer, whose position carries the epoch
stamped on the last batch it read, validates that position with OffsetForLeaderEpoch at the new
leader before fetching again (counted in the survivors' request metrics). kafka-python 3.0.12 would
validate the same way, but it sets a caught-up partition's position again after every empty fetch
with leader epoch -1, and a position without an epoch is not validated; it sends Fetch v12 with
``current_leader_epoch`` checked instead. The shared log never diverges, so either way every
acknowledged record is consumed exactly once.

The group forms through :func:`tests.support.kafka_python_stall.form`, judged on the log of node 1,
its coordinator until the kill (run at debug level for ``group.sync_answered``): kafka-python 3.0.12
can stall after the SyncGroup of its own rejoin (see that module); a proven stall is replaced once."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from kcoord.protocol.api_keys import ApiKey
from tests.support import kafka_python_stall
from tests.support.cluster_nodes import (
    cluster_status,
    group_on,
    metric_samples,
    produce_to_leaders,
    start_nodes,
    wait_converged,
    wait_until,
)
from tests.support.failover_clients import DefaultTimingGroup
from tests.support.group_clients import ClientKind, assert_exactly_once
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

TOPIC, PARTITIONS, PER_ROUND = "epochs", 6, 20
SESSION_MS = 10_000


def offset_for_leader_epoch_requests(node: KcoordProcess) -> dict[tuple[int, str], float]:
    """OffsetForLeaderEpoch requests the node answered, by (version, error), from its /metrics."""
    return {
        (int(sample.labels["version"]), sample.labels["error"]): sample.value
        for sample in metric_samples(node, "kcoord_requests_total")
        if sample.labels.get("api") == "OffsetForLeaderEpoch"
    }


def validations(nodes: list[KcoordProcess]) -> float:
    """OffsetForLeaderEpoch requests the nodes answered without error."""
    return sum(
        count
        for node in nodes
        for (_, error), count in offset_for_leader_epoch_requests(node).items()
        if error == "NONE"
    )


def metadata_epochs(node: KcoordProcess) -> dict[int, tuple[int, int]]:
    """Partition of TOPIC -> (leader, leader epoch) as the node's Metadata v12 answers."""
    body = {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": TOPIC}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    with RawClient(node.host, node.port) as raw:
        answer = raw.call(ApiKey.METADATA, 12, body)
    return {
        int(p.partition_index): (int(p.leader_id), int(p.leader_epoch)) for p in answer.topics[0].partitions
    }


def epochs(node: KcoordProcess) -> dict[int, tuple[int | None, int]]:
    """Partition of TOPIC -> (owner, owner epoch) as the node last read them."""
    entries = cluster_status(node)["partitions"].get(TOPIC, [])
    return {int(e["partition"]): (e["owner"], int(e["epoch"])) for e in entries}


@pytest.mark.parametrize(
    "kind",
    [ClientKind("confluent", "confluent"), ClientKind("kafka-python", "kafka-python")],
    ids=["confluent", "kafka-python"],
)
@pytest.mark.slow
def test_a_consumer_validates_its_position_after_a_leader_failover(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster, kind: ClientKind
) -> None:
    """Kill the coordinator and leader of some partitions: new epochs on the survivors, the consumer
    asks OffsetForLeaderEpoch there (answered without error) and consumes everything exactly once."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3, **kafka_python_stall.DEBUG_LOG)
    wait_converged(nodes, postgres_cluster, database)
    with RawClient(nodes[0].host, nodes[0].port) as raw:
        assert create_topic(raw, TOPIC, PARTITIONS) == 0
    wait_until(
        lambda: len(epochs(nodes[1])) == PARTITIONS and all(o for o, _ in epochs(nodes[1]).values()),
        30,
        "node 2 sees every partition's owner",
    )
    expected = produce_to_leaders(nodes, TOPIC, PARTITIONS, PER_ROUND)
    before = epochs(nodes[1])
    moved = {p for p, (owner, _) in before.items() if owner == 1}
    assert moved and len(before) == PARTITIONS, before
    group_id = group_on(1, nodes, "epochs")
    bootstrap = ",".join(node.bootstrap for node in nodes)
    # The group's server is its coordinator (node 1): the stall is proven from that node's log.
    group = DefaultTimingGroup(nodes[0], TOPIC, group_id, PARTITIONS, bootstrap=bootstrap)
    try:
        group.start(kind, session_timeout_ms=SESSION_MS)
        kafka_python_stall.form(
            group,
            session_timeout_ms=SESSION_MS,
            heartbeat_ms=group.heartbeat_ms,
            restart=lambda _stalled: group.start(kind, session_timeout_ms=SESSION_MS),
        )
        group.wait_consumed(expected, timeout=60)
        survivors = nodes[1:]
        validated_before = validations(survivors)

        with group.fault_window():  # the coordinator and leader dies: until the member consumes again
            nodes[0].kill()
            killed_at = time.monotonic()
            wait_until(
                lambda: all(epochs(nodes[1]).get(p, (1, 0))[0] in (2, 3) for p in moved),
                30,
                "partitions claimed",
            )
            after = epochs(nodes[1])
            assert all(after[p][1] > before[p][1] for p in moved), (before, after)

            def metadata_moved() -> bool:
                answered = metadata_epochs(nodes[2])
                return all(answered[p][0] in (2, 3) and answered[p][1] > before[p][1] for p in moved)

            wait_until(metadata_moved, 10, "Metadata reports the new leaders with newer epochs")
            later = produce_to_leaders(survivors, TOPIC, PARTITIONS, PER_ROUND, timeout=60)
            expected |= later
            counts = group.wait_consumed(expected, timeout=60)
        assert_exactly_once(counts, expected)

        validated = validations(survivors)
        answered = [offset_for_leader_epoch_requests(n) for n in survivors]
        if kind.client == "confluent":
            assert validated > validated_before, f"{kind.name} sent no OffsetForLeaderEpoch: {answered}"
        print(
            f"{kind.name}: epochs {[before[p][1] for p in sorted(moved)]} -> "
            f"{[after[p][1] for p in sorted(moved)]} after {time.monotonic() - killed_at:.1f}s; "
            f"OffsetForLeaderEpoch answered without error {validated - validated_before:.0f} times"
        )
    finally:
        group.stop_all()
