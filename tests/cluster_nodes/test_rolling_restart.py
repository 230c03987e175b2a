"""Acceptance 6 of issue 9: restart the three nodes one after another (SIGTERM, start again on the
same port) under a consuming group; every record produced before, between and after the restarts
is consumed (none lost), and the longest pause (a round produced until all of it is consumed) is
printed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.client_errors import RETRIABLE_CODES
from tests.support.cluster_nodes import group_on, produce_to_leaders, start_nodes, wait_converged
from tests.support.failover_clients import DefaultTimingGroup
from tests.support.group_clients import ClientKind
from tests.support.kafka_python_stall import DEBUG_LOG, form_default_timing
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

KINDS = [ClientKind("confluent", "confluent"), ClientKind("kafka-python", "kafka-python")]
TOPIC, PARTITIONS, PER_ROUND = "rolling", 4, 10
PAUSE_BOUND_S = 30.0
SESSION_MS = 10_000


@pytest.mark.slow
def test_a_rolling_restart_loses_nothing(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """Each node in turn hands its partitions over on SIGTERM and takes a share back on restart;
    the group keeps consuming and every acknowledged record is consumed."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3, **DEBUG_LOG)
    wait_converged(nodes, postgres_cluster, database)
    with RawClient(nodes[0].host, nodes[0].port) as raw:
        assert create_topic(raw, TOPIC, PARTITIONS) == 0
    expected = produce_to_leaders(nodes, TOPIC, PARTITIONS, PER_ROUND)
    bootstrap = ",".join(node.bootstrap for node in nodes)
    group = DefaultTimingGroup(
        nodes[0], TOPIC, group_on(2, nodes, "rolling"), PARTITIONS, bootstrap=bootstrap
    )
    pauses: list[float] = []
    try:
        for kind in KINDS:
            group.start(kind, session_timeout_ms=SESSION_MS)
        form_default_timing(group, session_timeout_ms=SESSION_MS, coordinator=nodes[1], timeout=60)
        group.wait_consumed(expected, timeout=60)
        for node in nodes:
            with group.fault_window():  # a node leaves and comes back: until the group consumes again
                assert node.terminate() == 0
                produced_at = time.monotonic()
                round_records = produce_to_leaders(
                    nodes, TOPIC, PARTITIONS, PER_ROUND, timeout=60, allowed=RETRIABLE_CODES
                )
                expected |= round_records
                group.wait_consumed(expected, timeout=60)
                pauses.append(time.monotonic() - produced_at)
                node.start()
                wait_converged(nodes, postgres_cluster, database)
                produced_at = time.monotonic()
                expected |= produce_to_leaders(
                    nodes, TOPIC, PARTITIONS, PER_ROUND, timeout=60, allowed=RETRIABLE_CODES
                )
                group.wait_consumed(expected, timeout=60)
                pauses.append(time.monotonic() - produced_at)
        print(
            f"rolling restart: longest pause for group {group.group}: {max(pauses):.2f}s",
            f"over {len(pauses)} rounds",
        )
        assert max(pauses) < PAUSE_BOUND_S, group.diagnose()
    finally:
        group.stop_all()
