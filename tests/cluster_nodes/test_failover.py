"""Three kcoord nodes over one PostgreSQL: the offsets partitions are spread over them, a paused
coordinator's groups move to a survivor after its lease with their commits, and the paused node's
writes are refused once it resumes (epoch fencing), after which it steps down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.cluster_nodes import (
    OFFSETS_PARTITIONS,
    call,
    cluster_status,
    commit_error,
    committed,
    create_topic,
    find_coordinator,
    group_on,
    owners,
    start_nodes,
    wait_converged,
    wait_until,
)
from tests.support.failover_clients import DefaultTimingGroup, group_view
from tests.support.group_clients import ClientKind
from tests.support.kafka_python_stall import DEBUG_LOG, form_default_timing
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

ALL_TOPICS = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_topic_authorized_operations": False,
}

LEASE_MS = 3000
RENEW_MS = 500
TOPIC = "cluster-t"


@pytest.fixture
def database(postgres_cluster: PostgresCluster) -> str:
    return postgres_cluster.create_database()


@pytest.fixture
def three_nodes(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, database: str, postgres_cluster: PostgresCluster
) -> Iterator[list[KcoordProcess]]:
    nodes = start_nodes(
        kcoord_factory,
        tmp_path,
        database,
        3,
        **{"kcoord.node.lease.ms": str(LEASE_MS), "kcoord.node.lease.renew.ms": str(RENEW_MS), **DEBUG_LOG},
    )
    wait_converged(nodes, postgres_cluster, database)
    for node in nodes:
        create_topic(node, TOPIC, 1)
    yield nodes
    for node in nodes:
        if node.proc is not None and node.proc.poll() is None:
            os.kill(node.proc.pid, signal.SIGCONT)


def test_partitions_are_spread_and_every_node_agrees(
    three_nodes: list[KcoordProcess], postgres_cluster: PostgresCluster, database: str
) -> None:
    """Each node owns a third of the offsets partitions (within one) and every node names the same
    coordinator for a group, which accepts its commits while the others answer NOT_COORDINATOR."""
    spread = Counter(owners(postgres_cluster, database).values())
    assert sum(spread.values()) == OFFSETS_PARTITIONS
    assert max(spread.values()) - min(spread.values()) <= 1
    for node_id in (1, 2, 3):
        group = group_on(node_id, three_nodes, "spread")
        assert {find_coordinator(node, group) for node in three_nodes} == {(ErrorCode.none, node_id)}
        for node in three_nodes:
            with RawClient(node.host, node.port) as client:
                expected = ErrorCode.none if node is three_nodes[node_id - 1] else ErrorCode.not_coordinator
                assert commit_error(client, group, TOPIC, 3) == expected


def test_nodes_and_owners_are_visible_everywhere(three_nodes: list[KcoordProcess]) -> None:
    """Metadata and DescribeCluster list the three live nodes; /v1/cluster and ``kcoord cluster
    status`` show every offsets partition with a live owner and its epoch."""
    for node in three_nodes:
        metadata = call(
            node,
            ApiKey.METADATA,
            12,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        assert sorted((b.node_id, b.port) for b in metadata.brokers) == [
            (n + 1, three_nodes[n].port) for n in range(3)
        ]
        described = call(node, ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
        assert sorted(b.broker_id for b in described.brokers) == [1, 2, 3]
        assert described.cluster_id == metadata.cluster_id
    address = three_nodes[0].metrics_address

    status = cluster_status(three_nodes[0])
    assert status["cluster"] and status["serving"]
    assert [n["node_id"] for n in status["live_nodes"]] == [1, 2, 3]
    offsets = status["partitions"]["__consumer_offsets"]
    assert len(offsets) == OFFSETS_PARTITIONS and {e["owner"] for e in offsets} == {1, 2, 3}
    shown = subprocess.run(
        [sys.executable, "-m", "kcoord", "cluster", "status", "--metrics", address],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert "__consumer_offsets" in shown and all(f"127.0.0.1:{n.port}" in shown for n in three_nodes)


def test_a_paused_coordinator_is_replaced_and_fenced(
    three_nodes: list[KcoordProcess], postgres_cluster: PostgresCluster, database: str
) -> None:
    """SIGSTOP the coordinator past its lease: a survivor becomes the coordinator with the committed
    offset and the group's history shows the move; after SIGCONT the old node's commit (sent on a
    connection it accepted before the pause) is refused, it steps down, and the refused commit never
    shows."""
    old = three_nodes[0]
    group = group_on(1, three_nodes, "paused")
    with RawClient(old.host, old.port) as stale:
        assert commit_error(stale, group, TOPIC, 5) == ErrorCode.none
        assert old.proc is not None
        os.kill(old.proc.pid, signal.SIGSTOP)
        survivor = three_nodes[1]
        took = wait_until(
            lambda: find_coordinator(survivor, group)[1] in (2, 3), 30, "a survivor coordinates the group"
        )
        new_id = find_coordinator(survivor, group)[1]
        new = three_nodes[new_id - 1]
        wait_until(lambda: committed(new, group) == (ErrorCode.none, 5), 15, "the new coordinator loaded")
        with RawClient(new.host, new.port) as client:
            assert commit_error(client, group, TOPIC, 7) == ErrorCode.none
        with urllib.request.urlopen(f"http://{new.metrics_address}/v1/groups/{group}", timeout=10) as reply:
            moves = json.loads(reply.read())["coordinator_moves"]
        assert (moves[-1]["node_id"], moves[-1]["previous_node"]) == (new_id, 1)
        assert [move["epoch"] for move in moves] == sorted(move["epoch"] for move in moves)

        os.kill(old.proc.pid, signal.SIGCONT)
        assert commit_error(stale, group, TOPIC, 99) in (
            ErrorCode.not_coordinator,
            ErrorCode.coordinator_not_available,
        )
    old.wait_for_event("cluster.stepping_down", timeout=10)

    # Once back, the old node takes its share of the spread again, so the group may move once more:
    # ask whoever coordinates it now, and every node must agree on who that is.
    def current_commit() -> tuple[int, int | None]:
        code, coordinator_id = find_coordinator(survivor, group)
        return committed(three_nodes[coordinator_id - 1], group) if code == ErrorCode.none else (code, None)

    wait_until(lambda: current_commit() == (ErrorCode.none, 7), 15, "the group's coordinator has commit 7")
    wait_until(
        lambda: len({find_coordinator(node, group) for node in three_nodes}) == 1,
        10,
        "every node names the same coordinator",
    )
    assert took < (LEASE_MS + 4 * RENEW_MS) / 1000 + 5
    print(f"failover after SIGSTOP: FindCoordinator moved {took:.2f}s after the pause (lease {LEASE_MS} ms)")


def test_a_clean_shutdown_hands_over_at_once(
    three_nodes: list[KcoordProcess], postgres_cluster: PostgresCluster, database: str
) -> None:
    """SIGTERM a node: its partitions are owned by the others well before its lease could lapse."""
    group = group_on(3, three_nodes, "handover")
    with RawClient(three_nodes[2].host, three_nodes[2].port) as client:
        assert commit_error(client, group, TOPIC, 11) == ErrorCode.none
    assert three_nodes[2].terminate() == 0
    took = wait_until(
        lambda: set(owners(postgres_cluster, database).values()) == {1, 2}, 10, "the others own everything"
    )
    assert took < LEASE_MS / 1000
    wait_until(lambda: find_coordinator(three_nodes[0], group)[1] in (1, 2), 5, "a new coordinator")
    new = three_nodes[find_coordinator(three_nodes[0], group)[1] - 1]
    wait_until(lambda: committed(new, group) == (ErrorCode.none, 11), 10, "commits carried over")


def _generations(nodes: list[KcoordProcess], group: str) -> dict[int, int]:
    """Node id -> the generation of ``group`` on every node that holds it loaded now."""
    held: dict[int, int] = {}
    for node in nodes:
        try:
            held[int(node.settings["node.id"])] = int(group_view(node, group)["generation"])
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
    return held


@pytest.mark.slow
def test_a_paused_coordinator_never_answers_beside_its_successor(
    three_nodes: list[KcoordProcess], postgres_cluster: PostgresCluster, database: str
) -> None:
    """A kafka-python member in a group coordinated by node 1: SIGSTOP node 1 past its lease, a
    survivor loads the group with the same generation (no rebalance), and from SIGCONT on no two
    nodes ever hold the group at once (the old node steps down, re-registers, and may take the group
    back by the spread, a handover), always at the generation it had."""
    group_id = group_on(1, three_nodes, "generation")
    bootstrap = ",".join(node.bootstrap for node in three_nodes)
    group = DefaultTimingGroup(three_nodes[1], TOPIC, group_id, 1, bootstrap=bootstrap)
    try:
        group.start(ClientKind("kafka-python", "kafka-python"), session_timeout_ms=10_000)
        # node 1 coordinates the group until the pause: the stall's proof is in its log
        form_default_timing(group, session_timeout_ms=10_000, coordinator=three_nodes[0], timeout=60)
        (member,) = group.drivers
        before = _generations(three_nodes, group_id)
        assert list(before) == [1]
        assignments = len(member.of_kind("assigned"))
        old = three_nodes[0]
        assert old.proc is not None
        # The pause is the fault; it lasts until the paused node has stepped down.
        with group.fault_window():
            os.kill(old.proc.pid, signal.SIGSTOP)
            wait_until(
                lambda: set(_generations(three_nodes[1:], group_id)) & {2, 3}, 30, "a survivor loads it"
            )
            os.kill(old.proc.pid, signal.SIGCONT)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                held = _generations(three_nodes, group_id)
                assert len(held) <= 1, held  # none for a moment while the group moves back to node 1
                assert set(held.values()) <= set(before.values()), (held, before)
                time.sleep(0.05)
            old.wait_for_event("cluster.stepping_down", timeout=10)
        assert len(member.of_kind("assigned")) == assignments, group.diagnose()
    finally:
        group.stop_all()
