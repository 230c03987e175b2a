"""``kcoord transactions`` against a two-node cluster through one node's address: ``list`` shows an id
the other node coordinates, ``describe-producers`` and ``abort`` reach the partition's leader on the
other node, and ``find-hanging`` tells an ongoing transaction from a hanging one across nodes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kcoord.cli import main
from kcoord.cli.admin_client import AdminClient
from kcoord.protocol.api_keys import ApiKey
from tests.support.cluster_nodes import call, owners, start_nodes, wait_converged, wait_until
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, read_all, transactional_producer

pytestmark = [pytest.mark.clients, pytest.mark.slow]

TOPIC, PARTITIONS = "ops-txn", 4


def _coordinated_by(node: KcoordProcess, node_id: int) -> str:
    """A transactional id whose coordinator is ``node_id`` (FindCoordinator key type 1)."""
    for n in range(64):
        candidate = f"ops-tx-{n}"
        answer = call(node, ApiKey.FIND_COORDINATOR, 3, {"key": candidate, "key_type": 1})
        if answer.error_code == 0 and int(answer.node_id) == node_id:
            return candidate
    raise AssertionError(f"no id among 64 coordinated by node {node_id}")


def _first_partition_led_by(node: KcoordProcess, leader_id: int) -> int:
    """The lowest partition of the topic that ``node``'s metadata says ``leader_id`` leads, once it
    says so: the catalogue's owners (PostgreSQL) spread before each node's metadata view follows."""
    led: list[int] = []

    def node_sees_it() -> bool:
        with AdminClient(node.host, node.port) as admin:
            (topic,) = admin.metadata([TOPIC]).topics
        led[:] = sorted(int(p.partition_index) for p in topic.partitions if int(p.leader_id) == leader_id)
        return bool(led)

    wait_until(node_sees_it, 30, f"{node.bootstrap}'s metadata shows a partition led by {leader_id}")
    return led[0]


def _stable_offset(node: KcoordProcess, partition: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 1,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}],
            }
        ],
    }
    (part,) = call(node, ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions
    assert part.error_code == 0
    return int(part.offset)


def test_transaction_commands_reach_the_node_that_holds_what_they_ask_about(
    kcoord_factory: type[KcoordProcess],
    tmp_path: Path,
    postgres_cluster: PostgresCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Through node 1 only: list shows node 2's id Ongoing with node 2 as coordinator; find-hanging of
    node 2's partitions lists nothing (the coordinator still counts them); abort --start-offset on a
    partition node 2 leads moves its last stable offset to its end; the producer's own abort then
    ends the rest, and read_committed readers see none of it."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 2)
    wait_converged(nodes, postgres_cluster, database)
    with RawClient(nodes[0].host, nodes[0].port) as raw:
        assert create_topic(raw, TOPIC, PARTITIONS) == 0
    wait_until(
        lambda: set(owners(postgres_cluster, database, TOPIC).values()) == {1, 2}, 30, "the topic spread"
    )
    transactional_id = _coordinated_by(nodes[0], 2)
    bootstrap = ",".join(node.bootstrap for node in nodes)
    producer = transactional_producer(bootstrap, transactional_id)
    producer.begin_transaction()
    for i in range(8):
        producer.produce(TOPIC, value=b"open-%d" % i, partition=i % PARTITIONS)
    assert producer.flush(DEADLINE_S) == 0
    only_node_1 = ("--bootstrap", nodes[0].bootstrap)

    assert main(["transactions", "list", "--json", *only_node_1]) == 0
    listed = {t["transactional_id"]: t for t in json.loads(capsys.readouterr().out)}
    assert (listed[transactional_id]["coordinator"], listed[transactional_id]["state"]) == (2, "Ongoing")

    led_by_2 = _first_partition_led_by(nodes[0], 2)
    where = ("--topic", TOPIC, "--partition", str(led_by_2))
    assert main(["transactions", "describe-producers", *where, "--json", *only_node_1]) == 0
    (producer_state,) = json.loads(capsys.readouterr().out)
    assert producer_state["producer_id"] == listed[transactional_id]["producer_id"]
    start_offset = producer_state["start_offset"]
    assert start_offset >= 0

    time.sleep(0.01)  # so the open transactions are older than the 0 minutes asked below
    search = ["find-hanging", "--broker-id", "2", "--max-transaction-timeout", "0", "--json"]
    assert main(["transactions", *search, *only_node_1]) == 0
    assert json.loads(capsys.readouterr().out) == []

    leader = nodes[1]
    assert _stable_offset(leader, led_by_2) == start_offset
    assert main(["transactions", "abort", *where, "--start-offset", str(start_offset), *only_node_1]) == 0
    end = start_offset + 2 + 1  # two records, then the abort marker
    assert _stable_offset(leader, led_by_2) == end

    producer.abort_transaction(DEADLINE_S)
    assert read_all(bootstrap, TOPIC, PARTITIONS) == []
    assert len(read_all(bootstrap, TOPIC, PARTITIONS, committed_only=False)) == 8
