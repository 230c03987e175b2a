"""Coordinator failover time of a three-node cluster over PostgreSQL (issue 9, acceptance 3 and 7).

Per run: a fresh database in a throwaway PostgreSQL (``tests/support/postgres.py``), three
``kcoord serve`` nodes with ``kcoord.cluster.enable`` and the default lease (6 s, renewed every 1 s,
or ``--cluster-failover-lease-ms``), a group coordinated by node 1 with one committed offset. Node 1
is SIGKILLed; the figure is the time until a survivor answers FindCoordinator with itself *and*
serves the group's committed offset (the partition claimed and replayed), polled every 20 ms. The
section's own server is not used. The expected value is about one lease plus up to one renewal.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from report import Measurement
from server import BenchServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.cluster_nodes import (
    commit_error,
    committed,
    create_topic,
    find_coordinator,
    group_on,
    owners,
    wait_until,
)
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess

from kcoord.protocol.errors import ErrorCode

DESCRIPTION = "coordinator failover after SIGKILL, three nodes over PostgreSQL (lease 6 s)"
TOPIC = "failover-bench"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cluster_failover")
    group.add_argument("--cluster-failover-lease-ms", type=int, default=6000, help="node lease (6000)")
    group.add_argument("--cluster-failover-renew-ms", type=int, default=1000, help="lease renewal (1000)")


def _one_run(cluster: PostgresCluster, options: argparse.Namespace, root: Path) -> float:
    database = cluster.create_database("failover")
    nodes = [
        KcoordProcess(
            root / f"node{n}",
            {
                "kcoord.storage.url": database,
                "kcoord.cluster.enable": "true",
                "node.id": str(n),
                "offsets.topic.num.partitions": "12",
                "kcoord.node.lease.ms": str(options.cluster_failover_lease_ms),
                "kcoord.node.lease.renew.ms": str(options.cluster_failover_renew_ms),
            },
        ).start()
        for n in (1, 2, 3)
    ]
    try:
        wait_until(lambda: set(owners(cluster, database).values()) == {1, 2, 3}, 60, "offsets spread")
        create_topic(nodes[0], TOPIC, 1)
        group = group_on(1, nodes, "bench")
        with RawClient(nodes[0].host, nodes[0].port) as client:
            assert commit_error(client, group, TOPIC, 42) == ErrorCode.none
        survivors = nodes[1:]

        def moved() -> bool:
            error, coordinator = find_coordinator(survivors[0], group)
            if error != ErrorCode.none or coordinator not in (2, 3):
                return False
            return committed(nodes[coordinator - 1], group) == (ErrorCode.none, 42)

        nodes[0].kill()
        killed = time.monotonic()
        wait_until(moved, 60, "a survivor serves the group")
        return time.monotonic() - killed
    finally:
        for node in nodes:
            node.kill()


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    cluster = PostgresCluster().start()
    seconds: list[float] = []
    try:
        for number in range(options.runs):
            with tempfile.TemporaryDirectory(prefix="kcoord-failover-") as root:
                took = _one_run(cluster, options, Path(root))
            seconds.append(took)
            print(f"  run {number + 1}: failover {took:.2f} s", flush=True)
    finally:
        cluster.stop()
    return [
        Measurement("failover after SIGKILL", "s", tuple(seconds)),
        Measurement(
            "failover / lease", "ratio", tuple(s * 1000 / options.cluster_failover_lease_ms for s in seconds)
        ),
    ]
