"""Issue 15, "one node.id, two processes": a second ``kcoord serve`` with a live node's id is refused,
and a node SIGSTOPped past its lease whose id another process took meanwhile, once resumed, stops
(it logs why and exits 3) instead of taking partitions back: no owner epoch moves."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from kcoord.protocol.errors import ErrorCode
from tests.cli.test_startup_errors import no_traceback, serve
from tests.support.cluster_nodes import (
    OFFSETS_PARTITIONS,
    TRANSACTION_STATE_PARTITIONS,
    cluster_settings,
    cluster_status,
    commit_error,
    create_topic,
    wait_until,
)
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

LEASE = {"kcoord.node.lease.ms": "2000", "kcoord.node.lease.renew.ms": "250"}
WATCH_S = 30.0


def epochs(postgres: PostgresCluster, database: str) -> list[str]:
    """Every partition's owner and owner epoch as the database records them."""
    rows = postgres.sql(
        database,
        "SELECT topic, partition_id, coalesce(owner_node, -1), owner_epoch FROM log_partitions"
        " ORDER BY topic, partition_id",
    )
    return rows.splitlines()


COORDINATOR_PARTITIONS = OFFSETS_PARTITIONS + TRANSACTION_STATE_PARTITIONS
"""What a lone node owns before any data topic: the offsets and the transaction state partitions."""


def serves_everything(node: KcoordProcess, partitions: int = COORDINATOR_PARTITIONS) -> bool:
    """The node serves, and owns ``partitions`` partitions (every one there is, as the only node)."""
    status = cluster_status(node)
    return bool(status["serving"]) and status["owned"] == partitions


def test_a_second_process_with_a_live_node_id_is_refused(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """Node 1 serving; a second ``serve`` as node 1 (its own data directory) exits 3 in one line
    once it sees node 1's lease renewed, and node 1 keeps every partition at its epoch."""
    database = postgres_cluster.create_database()
    first = kcoord_factory(tmp_path / "a", cluster_settings(database, 1, **LEASE)).start()
    wait_until(lambda: serves_everything(first), 30, "node 1 serves every offsets partition")
    before = epochs(postgres_cluster, database)
    flags = [f"{name}={value}" for name, value in cluster_settings(database, 1, **LEASE).items()]
    result = serve(
        tmp_path / "b", "127.0.0.1:0", "127.0.0.1:0", *(arg for f in flags for arg in ("--set", f))
    )
    assert result.returncode == 3 and no_traceback(result.stderr), result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert lines == [
        "kcoord: node id 1 is held by another live kcoord process (it keeps renewing its lease):"
        " give this node another node.id"
    ]
    assert epochs(postgres_cluster, database) == before
    assert serves_everything(first) and first.proc is not None and first.proc.poll() is None


@pytest.mark.slow
def test_a_resumed_process_whose_node_id_was_taken_over_stops_and_moves_no_epoch(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """A is SIGSTOPped past its lease, B starts as the same node id and claims everything, A gets
    SIGCONT. For 30 s afterwards no owner epoch moves and B alone serves (commits through it work);
    A logs cluster.node_id_taken_over, prints one kcoord: line and exits 3."""
    database = postgres_cluster.create_database()
    settings = cluster_settings(database, 1, **LEASE)
    a = kcoord_factory(tmp_path / "a", settings).start()
    wait_until(lambda: serves_everything(a), 30, "A serves every offsets partition")
    assert a.proc is not None
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        b = kcoord_factory(tmp_path / "b", settings).start(timeout=60)
        wait_until(lambda: serves_everything(b), 30, "B serves every offsets partition")
        create_topic(b, "t", 1)
        wait_until(lambda: serves_everything(b, COORDINATOR_PARTITIONS + 1), 30, "B leads t-0")
        taken = epochs(postgres_cluster, database)
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    started = time.monotonic()
    commits = 0
    with RawClient(b.host, b.port) as client:
        while time.monotonic() - started < WATCH_S:
            assert epochs(postgres_cluster, database) == taken
            b_alive = b.proc is not None and b.proc.poll() is None
            assert b_alive and serves_everything(b, COORDINATOR_PARTITIONS + 1)
            commits += 1
            assert commit_error(client, "g", "t", commits) == ErrorCode.none
            time.sleep(0.5)
    a.proc.wait(10)
    assert a.terminate() == 3  # exited already: this only waits for the rest of its log
    print(f"A stopped at {a.events('cluster.node_id_taken_over')[0]['timestamp']}; B took {commits} commits")
    for node in (a, b):
        assert not [e for e in node.logs if e.get("level") in ("error", "critical")], node.data_dir
    (stopped,) = a.events("cluster.node_id_taken_over")
    assert "node id 1 was taken over by another kcoord process" in stopped["reason"]
    human = [line for line in a.raw_log if line.startswith("kcoord:")]
    assert len(human) == 1 and human[0].startswith("kcoord: node id 1 was taken over")
    assert not [e for e in a.events("cluster.partition_acquired") if e["timestamp"] > stopped["timestamp"]]
    assert epochs(postgres_cluster, database) == taken
