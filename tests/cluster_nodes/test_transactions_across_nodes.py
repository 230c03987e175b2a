"""Transactions in a two-node cluster: the transactional id's coordinator writes the markers of
partitions the other node leads by WriteTxnMarkers, so read_committed readers see exactly the
committed transactions whichever node leads each partition."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cluster_nodes import owners, start_nodes, wait_converged, wait_until
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, read_all, transactional_producer

pytestmark = pytest.mark.clients

TOPIC, PARTITIONS = "spread-txn", 4


def test_markers_reach_partitions_the_other_node_leads(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """Two committed transactions and one aborted one over four partitions led by both nodes: the
    read_committed reader sees exactly the committed records, the read_uncommitted one all of them."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(
        kcoord_factory, tmp_path, database, 2, **{"transaction.state.log.num.partitions": "4"}
    )
    wait_converged(nodes, postgres_cluster, database)
    with RawClient(nodes[0].host, nodes[0].port) as raw:
        assert create_topic(raw, TOPIC, PARTITIONS) == 0
    wait_until(
        lambda: set(owners(postgres_cluster, database, TOPIC).values()) == {1, 2}, 30, "the topic spread"
    )
    bootstrap = ",".join(node.bootstrap for node in nodes)
    producer = transactional_producer(bootstrap, "spread-writer")
    for prefix, commit in ((b"c1-", True), (b"a-", False), (b"c2-", True)):
        producer.begin_transaction()
        for i in range(20):
            producer.produce(TOPIC, value=prefix + b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(DEADLINE_S) == 0
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            producer.abort_transaction(DEADLINE_S)
    committed = [b"c1-%d" % i for i in range(20)] + [b"c2-%d" % i for i in range(20)]
    assert sorted(read_all(bootstrap, TOPIC, PARTITIONS)) == sorted(committed)
    everything = read_all(bootstrap, TOPIC, PARTITIONS, committed_only=False)
    assert sorted(everything) == sorted(committed + [b"a-%d" % i for i in range(20)])
