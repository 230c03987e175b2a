"""Acceptance 2 of issue 9: three nodes, groups of kafka-python, confluent-kafka and aiokafka
consumers coordinated by all three nodes, records produced to each partition's leader consumed
exactly once by every group."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcoord.protocol.errors import ErrorCode
from tests.support.cluster_nodes import (
    find_coordinator,
    group_on,
    produce_to_leaders,
    start_nodes,
    wait_converged,
)
from tests.support.failover_clients import DefaultTimingGroup
from tests.support.group_clients import ClientKind, assert_exactly_once
from tests.support.kafka_python_stall import DEBUG_LOG, form_default_timing
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

KAFKA_PYTHON = ClientKind("kafka-python", "kafka-python")
CONFLUENT = ClientKind("confluent", "confluent")
AIOKAFKA = ClientKind("aiokafka", "aiokafka")
MEMBERS = {1: [KAFKA_PYTHON, CONFLUENT], 2: [CONFLUENT, AIOKAFKA], 3: [AIOKAFKA, KAFKA_PYTHON]}
TOPIC, PARTITIONS, PER_ROUND = "spread", 4, 15
SESSION_MS = 10_000


@pytest.mark.slow
def test_groups_on_every_node_consume_exactly_once(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """One group per node (two client libraries each): all balanced, each coordinated where
    FindCoordinator says, every record consumed exactly once per group."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3, **DEBUG_LOG)
    wait_converged(nodes, postgres_cluster, database)
    with RawClient(nodes[2].host, nodes[2].port) as raw:
        assert create_topic(raw, TOPIC, PARTITIONS) == 0
    expected = produce_to_leaders(nodes, TOPIC, PARTITIONS, PER_ROUND)
    bootstrap = ",".join(node.bootstrap for node in nodes)
    groups: list[DefaultTimingGroup] = []
    try:
        for node_id, kinds in MEMBERS.items():
            group = DefaultTimingGroup(
                nodes[node_id - 1], TOPIC, group_on(node_id, nodes, "libs"), PARTITIONS, bootstrap=bootstrap
            )
            groups.append(group)
            for kind in kinds:
                group.start(kind, session_timeout_ms=SESSION_MS)
        for group in groups:  # each group's server is its coordinator
            form_default_timing(group, session_timeout_ms=SESSION_MS, timeout=90)
        expected |= produce_to_leaders(nodes, TOPIC, PARTITIONS, PER_ROUND)
        for node_id, group in zip(MEMBERS, groups, strict=True):
            assert_exactly_once(group.wait_consumed(expected, timeout=60), expected)
            assert {find_coordinator(node, group.group) for node in nodes} == {(ErrorCode.none, node_id)}
    finally:
        for group in groups:
            group.stop_all()
