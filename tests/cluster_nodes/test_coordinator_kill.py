"""Acceptance 3 of issue 9: SIGKILL the node coordinating a busy group of confluent-kafka and
kafka-python consumers (session 10 s, the clients' 3 s heartbeat) in a three-node cluster with the
default lease (6 s, renewed every second). A survivor loads the group with its generation and
members, so the move is no rebalance; consumption resumes within lease + 2 heartbeat intervals;
every acknowledged record is consumed exactly once, so nothing below a commit is read again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kcoord.protocol.errors import ErrorCode
from tests.support.client_errors import RETRIABLE_CODES
from tests.support.cluster_nodes import (
    find_coordinator,
    group_on,
    produce_to_leaders,
    start_nodes,
    wait_converged,
    wait_until,
)
from tests.support.failover_clients import DefaultTimingGroup
from tests.support.group_clients import ClientKind, assert_exactly_once
from tests.support.kafka_python_stall import DEBUG_LOG, form_default_timing
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

KINDS = [ClientKind("confluent", "confluent"), ClientKind("kafka-python", "kafka-python")]
LEASE_S, HEARTBEAT_S = 6.0, 3.0
SESSION_MS = 10_000
TOPIC, PARTITIONS, PER_ROUND = "busy", 4, 20


@pytest.mark.slow
def test_sigkill_of_the_coordinator_moves_the_group_without_a_rebalance(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """Kill the coordinator mid-consumption: same generation and assignment on a survivor, consuming
    again within lease + 2 heartbeats, every acknowledged record consumed exactly once."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3, **DEBUG_LOG)
    wait_converged(nodes, postgres_cluster, database)
    with RawClient(nodes[0].host, nodes[0].port) as raw:
        assert create_topic(raw, TOPIC, PARTITIONS) == 0
    expected = produce_to_leaders(nodes, TOPIC, PARTITIONS, PER_ROUND)
    group_id = group_on(1, nodes, "busy")
    bootstrap = ",".join(node.bootstrap for node in nodes)
    group = DefaultTimingGroup(nodes[1], TOPIC, group_id, PARTITIONS, bootstrap=bootstrap)
    try:
        for kind in KINDS:
            group.start(kind, session_timeout_ms=SESSION_MS)
        form_default_timing(group, session_timeout_ms=SESSION_MS, coordinator=nodes[0], timeout=60)
        members = list(group.drivers)
        group.wait_consumed(expected, timeout=60)
        assignments = {m.name: m.assignment for m in members}
        assigned_events = {m.name: len(m.of_kind("assigned")) for m in members}
        before = {m.name: dict(m.committed) for m in members}

        with group.fault_window():  # until every member consumed again and committed after the move
            nodes[0].kill()
            killed_at = time.monotonic()
            later = produce_to_leaders(
                nodes[1:], TOPIC, PARTITIONS, PER_ROUND, timeout=60, allowed=RETRIABLE_CODES
            )
            expected |= later
            counts = group.wait_consumed(expected, timeout=60)
            wait_until(
                lambda: all(m.committed != before[m.name] for m in members), 30, "commits after the move"
            )
        resumed_at = min(
            float(event["at"])
            for m in members
            for event in m.of_kind("consumed", since=killed_at)
            if any((int(p), int(o)) in later for p, o in event["records"])
        )
        pause = resumed_at - killed_at
        commits_back = min(
            float(event["at"])
            for m in members
            for event in m.of_kind("committed", since=killed_at)
            if any(int(o) > before[m.name].get(int(p), -1) for p, o in event["offsets"].items())
        )
        error, coordinator = find_coordinator(nodes[1], group_id)
        assert error == ErrorCode.none and coordinator in (2, 3)
        assert {m.name: m.assignment for m in members} == assignments, group.diagnose()
        assert {m.name: len(m.of_kind("assigned")) for m in members} == assigned_events, group.diagnose()
        assert_exactly_once(counts, expected)
        bound = LEASE_S + 2 * HEARTBEAT_S
        print(
            f"coordinator SIGKILL: consuming again after {pause:.2f}s, committing again after "
            f"{commits_back - killed_at:.2f}s (bound {bound}s)"
        )
        assert pause < bound, group.diagnose()
        assert commits_back - killed_at < bound + HEARTBEAT_S, group.diagnose()
    finally:
        group.stop_all()
