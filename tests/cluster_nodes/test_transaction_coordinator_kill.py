"""Acceptance 5 of issue 17: SIGKILL the node that coordinates a running confluent-kafka
consume-transform-produce pipeline's transactional id, in a three-node cluster on PostgreSQL with
the default lease (6 s, renewed every second).

The node dies in the middle of a transaction (its records sent, its offsets and commit not yet
asked), or 0-100 ms into a commit (AddOffsetsToTxn, EndTxn or the markers in flight: a decision
found at load is completed by the survivor, and a retried EndTxn answered as Kafka does). The
pipeline's group is coordinated by node 2, so the offsets marker of each transaction goes to
another node's ``__consumer_offsets`` partition (WriteTxnMarkers) before the kill, and after it
too when the id moves to node 3. A survivor claims the id's ``__transaction_state`` partition once
the lease has run out and loads it; the producer finds it (FindCoordinator, key type 1) when its
own retry to the dead node fails, which librdkafka spaces by its reconnect backoff
(``reconnect.backoff.max.ms``, 10 s by default), and the pipeline commits again. A read_committed
reader of the output sees every input record exactly once, and the markers the new coordinator
wrote (the last on each partition the later transactions wrote to) carry its coordinator epoch:
the leader epoch it claimed the state partition with, above the dead node's. Two figures are
printed: kill to a survivor answering for the id (kcoord's part) and kill to the commit of the
first transaction asked after it (with the client's part).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kcoord.coordinator.partitioner import partition_for
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.cluster_nodes import (
    TRANSACTION_STATE_PARTITIONS,
    call,
    create_topic,
    group_on,
    start_nodes,
    wait_converged,
)
from tests.support.postgres import PostgresCluster
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, describe, read_all
from tests.transactions.pipeline import Pipeline

pytestmark = pytest.mark.clients

SOURCE, SINK, PARTITIONS = "eos-in", "eos-out", 3
RECORDS = 6_000
KILL_AT_TRANSACTION = 4
"""About a third of the way (transactions of up to 500 records)."""
LEASE_S = 6.0
TAKEOVER_BOUND_S = LEASE_S + 3.0
"""The lease (counted from the dead node's last renewal), the survivor's next renewal, its load."""
CLIENT_BACKOFF_S = 10.0
"""librdkafka's ``reconnect.backoff.max.ms``: how long the producer may wait before it tries the
dead coordinator again, fails and asks FindCoordinator (nothing the broker side can shorten)."""


class TimedPipeline(Pipeline):
    """The pipeline, noting when each transaction's commit was asked and when it committed
    (monotonic seconds). With ``kill`` set, transaction ``KILL_AT_TRANSACTION`` calls it once:
    ``before_the_commit``, once its records are flushed and before its offsets and commit are
    asked; ``during_the_commit``, from a timer 0-100 ms into them (so it lands in
    ``send_offsets_to_transaction`` or ``commit_transaction``)."""

    commits: list[tuple[float, float]]
    kill: Callable[[], None] | None = None
    moment = "before_the_commit"

    def _commit(self) -> None:
        if self.kill is not None and self.run.transactions >= KILL_AT_TRANSACTION:
            kill, self.kill = self.kill, None
            if self.moment == "before_the_commit":
                self.producer.flush(DEADLINE_S)
                kill()
            else:
                threading.Timer(random.uniform(0, 0.1), kill).start()
        asked = time.monotonic()
        super()._commit()
        self.commits = [*getattr(self, "commits", []), (asked, time.monotonic())]


def coordinated_by(node: KcoordProcess, node_id: int, prefix: str) -> str:
    """A transactional id whose coordinator (FindCoordinator key type 1, asked of ``node``) is
    ``node_id``."""
    for n in range(1000):
        transactional_id = f"{prefix}-{n}"
        answer = call(node, ApiKey.FIND_COORDINATOR, 3, {"key": transactional_id, "key_type": 1})
        if answer.error_code == ErrorCode.none and answer.node_id == node_id:
            return transactional_id
    raise AssertionError(f"no transactional id coordinated by node {node_id}")


def answering_node(survivors: list[KcoordProcess], transactional_id: str) -> int | None:
    """The node id of the survivor that answers DescribeTransactions for the id (None: none yet)."""
    try:
        answer = call(survivors[0], ApiKey.FIND_COORDINATOR, 3, {"key": transactional_id, "key_type": 1})
        coordinator = next((n for n in survivors if int(n.settings["node.id"]) == answer.node_id), None)
        if answer.error_code != ErrorCode.none or coordinator is None:
            return None
        return int(answer.node_id) if describe(coordinator, transactional_id).error_code == 0 else None
    except OSError:
        return None


def state_partition_epoch(postgres: PostgresCluster, database: str, transactional_id: str) -> int:
    """The owner epoch of the id's ``__transaction_state`` partition, as the database records it."""
    partition = partition_for(transactional_id, TRANSACTION_STATE_PARTITIONS)
    return int(
        postgres.sql(
            database,
            "SELECT owner_epoch FROM log_partitions"
            f" WHERE topic = '__transaction_state' AND partition_id = {partition}",
        ).strip()
    )


def marker_coordinator_epochs(survivors: list[KcoordProcess], topic: str, partitions: int) -> list[int]:
    """Per partition of ``topic``, the highest coordinator epoch of its producers' last markers
    (DescribeProducers, answered by whichever survivor leads the partition)."""
    epochs = []
    for partition in range(partitions):
        body = {"topics": [{"name": topic, "partition_indexes": [partition]}]}
        for node in survivors:
            (answer,) = call(node, ApiKey.DESCRIBE_PRODUCERS, 0, body).topics[0].partitions
            if answer.error_code == ErrorCode.none:
                epochs.append(max(p.coordinator_epoch for p in answer.active_producers))
                break
        else:
            raise AssertionError(f"no survivor leads {topic}-{partition}")
    return epochs


def fill_source(bootstrap: str) -> list[bytes]:
    values = [b"r%06d" % i for i in range(RECORDS)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(SOURCE, value=value, partition=i % PARTITIONS)
        if i % 1000 == 999:
            producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    return values


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["before_the_commit", "during_the_commit"])
def test_the_pipeline_goes_on_exactly_once_after_its_transaction_coordinator_is_killed(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster, moment: str
) -> None:
    """SIGKILL of the transactional id's coordinator in a transaction (its records sent) or in its
    commit: a survivor answers for the id within the lease + 3 s, a transaction asked after the kill
    commits within that + the client's reconnect backoff, and the output holds every input record
    exactly once."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3)
    wait_converged(nodes, postgres_cluster, database)
    create_topic(nodes[0], SOURCE, PARTITIONS)
    create_topic(nodes[0], SINK, PARTITIONS)
    bootstrap = ",".join(node.bootstrap for node in nodes)
    values = fill_source(bootstrap)
    transactional_id = coordinated_by(nodes[1], 1, "eos-pipeline")
    group = group_on(2, nodes, "eos-group")
    pipeline = TimedPipeline(bootstrap, SOURCE, SINK, group, transactional_id, PARTITIONS)
    old_epoch = state_partition_epoch(postgres_cluster, database, transactional_id)
    killed: list[float] = []
    taken_over: list[tuple[float, int]] = []

    def watch_the_takeover() -> None:
        deadline = killed[0] + 60
        while time.monotonic() < deadline:
            node_id = answering_node(nodes[1:], transactional_id)
            if node_id is not None:
                taken_over.append((time.monotonic(), node_id))
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=watch_the_takeover, daemon=True)

    def kill_the_coordinator() -> None:
        nodes[0].kill()
        killed.append(time.monotonic())
        watcher.start()

    pipeline.kill, pipeline.moment = kill_the_coordinator, moment
    try:
        run = pipeline.copy(RECORDS, within_s=120)
    finally:
        pipeline.close()
    if killed:
        watcher.join(60)
    assert killed, "the coordinator was never killed"
    assert taken_over, "no survivor answered for the transactional id"
    takeover_s, new_coordinator = taken_over[0][0] - killed[0], taken_over[0][1]
    resumed_s = min(done for asked, done in pipeline.commits if asked > killed[0]) - killed[0]
    copied = read_all(",".join(node.bootstrap for node in nodes[1:]), SINK, PARTITIONS)
    print(
        f"transaction coordinator SIGKILL {moment}: node {new_coordinator} answers for the id after "
        f"{takeover_s:.2f}s, the pipeline commits again after {resumed_s:.2f}s (lease {LEASE_S}s); {run}"
    )
    assert new_coordinator in (2, 3)
    assert sorted(copied) == sorted(b"out-" + v for v in values), run
    new_epoch = state_partition_epoch(postgres_cluster, database, transactional_id)
    assert new_epoch > old_epoch
    epochs = marker_coordinator_epochs(nodes[1:], SINK, PARTITIONS)
    assert new_epoch in epochs and set(epochs) <= {old_epoch, new_epoch}, epochs
    assert takeover_s < TAKEOVER_BOUND_S, run
    assert resumed_s < TAKEOVER_BOUND_S + CLIENT_BACKOFF_S, run
