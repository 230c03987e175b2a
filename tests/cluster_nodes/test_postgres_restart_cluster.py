"""Acceptance 5 of issue 9: ``pg_ctl restart`` under a three-node cluster with a consuming group
and produces: every error a client reports is retriable, acknowledged records are all consumed,
the nodes recover without a restart of their own, and the group's commits work again afterwards."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kcoord.protocol.errors import ErrorCode
from tests.support.client_errors import RETRIABLE_CODES, ErrorLog
from tests.support.cluster_nodes import (
    committed,
    find_coordinator,
    group_on,
    produce_to_leaders,
    start_nodes,
    wait_converged,
    wait_until,
)
from tests.support.failover_clients import DefaultTimingGroup
from tests.support.group_clients import ClientKind
from tests.support.kafka_python_stall import DEBUG_LOG, form_default_timing
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

KINDS = [
    ClientKind("confluent", "confluent"),
    ClientKind("kafka-python", "kafka-python"),
    ClientKind("aiokafka", "aiokafka"),
]
TOPIC, PARTITIONS, PER_ROUND, ROUNDS = "pg-bounce", 4, 5, 10
SESSION_MS = 10_000


# The database goes away under load: writes and log recoveries fail until it is back (asyncpg's pool
# retrying its reconnections is a warning).
@pytest.mark.server_log_allows(
    "log.write_failed",
    "log.recovery_failed",
    "offsets_log.append_failed",
)
@pytest.mark.slow
def test_a_database_restart_under_load_recovers_by_itself(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """Produce rounds keep going while PostgreSQL restarts; the group's confluent-kafka,
    kafka-python and aiokafka members and the raw producer see only retriable errors, every
    acknowledged record is consumed, no node restarted, and the group commits again through its
    coordinator."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3, **DEBUG_LOG)
    wait_converged(nodes, postgres_cluster, database)
    with RawClient(nodes[0].host, nodes[0].port) as raw:
        assert create_topic(raw, TOPIC, PARTITIONS) == 0
    expected = produce_to_leaders(nodes, TOPIC, PARTITIONS, PER_ROUND)
    bootstrap = ",".join(node.bootstrap for node in nodes)
    group = DefaultTimingGroup(nodes[0], TOPIC, group_on(3, nodes, "bounce"), PARTITIONS, bootstrap=bootstrap)
    pids = [node.proc.pid for node in nodes if node.proc is not None]
    try:
        for kind in KINDS:
            group.start(kind, session_timeout_ms=SESSION_MS)
        form_default_timing(group, session_timeout_ms=SESSION_MS, coordinator=nodes[2], timeout=60)
        group.wait_consumed(expected, timeout=60)
        errors = ErrorLog()
        load_started = time.monotonic()
        restarter = threading.Thread(target=postgres_cluster.restart)
        with group.fault_window():  # the database restarts: until the group consumed every round
            for round_number in range(ROUNDS):
                if round_number == 2:
                    restarter.start()
                expected |= produce_to_leaders(
                    nodes, TOPIC, PARTITIONS, PER_ROUND, timeout=60, allowed=RETRIABLE_CODES, errors=errors
                )
                time.sleep(0.2)
            restarter.join(60)
            group.wait_consumed(expected, timeout=90)
        assert [node.proc.pid for node in nodes if node.proc is not None] == pids
        assert all(node.proc is not None and node.proc.poll() is None for node in nodes)
        assert all(len(node.events("kcoord.started")) == 1 for node in nodes)
        error, coordinator = find_coordinator(nodes[0], group.group)
        assert error == ErrorCode.none
        wait_until(
            lambda: committed(nodes[coordinator - 1], group.group)[0] == ErrorCode.none, 30, "offsets served"
        )
        before = {m.name: dict(m.committed) for m in group.drivers}
        expected |= produce_to_leaders(nodes, TOPIC, PARTITIONS, PER_ROUND, timeout=60, errors=errors)
        group.wait_consumed(expected, timeout=60)
        wait_until(lambda: all(m.committed != before[m.name] for m in group.drivers), 30, "commits again")
        assert all(driver.alive for driver in group.drivers), group.diagnose()
        errors.from_drivers(group.drivers, since=load_started)
    finally:
        group.stop_all()
    errors.assert_only_retriable()
