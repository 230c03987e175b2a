"""Acceptance 6 of issue 18: share groups in a three-node cluster. SIGKILL the node that leads the
share partition while three explicit-mode ShareConsumers run: the group goes on through the node
that takes the topic partition over, no acknowledged record is delivered again and every record
delivered but unacknowledged at the kill is delivered again (acceptance 4's counts).

The group is picked so that its share partition's state lives on a ``__share_group_state``
partition either of another node than the topic partition's leader (before the kill every
acknowledgement crosses nodes by WriteShareGroupState, and the state outlives the killed leader) or
of the leader itself (the state partition moves with it, and the new leader waits for its claim)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kcoord.coordinator.share.state_records import SHARE_STATE_TOPIC, state_partition_for, topic_id_text
from tests.support.cluster_nodes import metric_samples, owners, start_nodes, wait_converged, wait_until
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic
from tests.support.server import KcoordProcess
from tests.support.share_consumers import (
    STATE_LOCK,
    Member,
    new_consumer,
    produce_numbers,
    start_members,
    wait_for,
)

pytestmark = pytest.mark.clients

TOPIC = "queue"
STATE_PARTITIONS = 6
SETTINGS = {
    "kcoord.node.lease.ms": "3000",
    "kcoord.node.lease.renew.ms": "500",
    "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
    "group.share.partition.max.record.locks": "200",
}
"""A short lease for a quick takeover; at most 200 records in flight, so the members take turns."""


def _leader(postgres: PostgresCluster, database: str) -> int:
    owner = owners(postgres, database, TOPIC).get(0)
    assert owner is not None
    return owner


def _loaded_topic_id(nodes: list[KcoordProcess], group: str) -> uuid.UUID:
    """The topic id in a node's ``share_partition.loaded`` line for ``group`` (waits for one)."""

    def found() -> list[dict[str, Any]]:
        return [e for n in nodes for e in n.events("share_partition.loaded") if e.get("group") == group]

    wait_until(lambda: bool(found()), 60, f"the share partition of {group} loaded")
    return uuid.UUID(found()[0]["topic_id"])


def _state_partition(group: str, topic_id: uuid.UUID) -> int:
    return state_partition_for(f"{group}:{topic_id_text(topic_id)}:0", STATE_PARTITIONS)


def _group_with_state(
    postgres: PostgresCluster, database: str, topic_id: uuid.UUID, leader: int, *, on_the_leader: bool
) -> tuple[str, int]:
    """A group id whose share partition's state lives on ``leader`` (or on another node), and that node."""
    state_owners = owners(postgres, database, SHARE_STATE_TOPIC)
    for n in range(1000):
        group = f"jobs-{n}"
        owner = state_owners.get(_state_partition(group, topic_id))
        if owner is not None and (owner == leader) == on_the_leader:
            return group, owner
    raise AssertionError(f"no group's share state placed as wanted (leader {leader}): {state_owners}")


@pytest.mark.slow
@pytest.mark.parametrize("state_on_the_leader", [False, True], ids=["state-elsewhere", "state-on-the-leader"])
def test_sigkill_of_the_share_partition_leader_loses_no_acknowledgement_and_no_delivery(
    kcoord_factory: type[KcoordProcess],
    tmp_path: Path,
    postgres_cluster: PostgresCluster,
    state_on_the_leader: bool,
) -> None:
    """Kill the topic partition's leader mid-run: a survivor takes the share partition over from its
    durable state (kept by another node, or moved from the killed one), acknowledged records are not
    delivered again, every record delivered but unacknowledged at the kill is delivered again, and
    every record ends acknowledged."""
    total = 4_000
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3, **SETTINGS)
    wait_converged(nodes, postgres_cluster, database)
    with RawClient(nodes[0].host, nodes[0].port) as raw:
        assert create_topic(raw, TOPIC, 1) == 0
    wait_until(lambda: owners(postgres_cluster, database, TOPIC).get(0) is not None, 30, "the topic owned")
    leader = _leader(postgres_cluster, database)
    bootstrap = ",".join(node.bootstrap for node in nodes)

    # 1. A first share group makes __share_group_state; the test's group keeps its state elsewhere.
    warm = start_members(1, lambda: new_consumer(bootstrap, "warm-up", TOPIC))
    try:
        topic_id = _loaded_topic_id(nodes, "warm-up")
    finally:
        warm[0].close()
    wait_until(
        lambda: (
            None not in owners(postgres_cluster, database, SHARE_STATE_TOPIC).values()
            and len(owners(postgres_cluster, database, SHARE_STATE_TOPIC)) == STATE_PARTITIONS
        ),
        30,
        "__share_group_state spread",
    )
    group, state_owner = _group_with_state(
        postgres_cluster, database, topic_id, leader, on_the_leader=state_on_the_leader
    )
    members = start_members(3, lambda: new_consumer(bootstrap, group, TOPIC, explicit=True), explicit=True)
    for member in members:
        member.hold_s = 0.3
    killed = nodes[leader - 1]
    snapshot: dict[str, Any] = {}

    def killed_between_acknowledgements() -> bool:
        """Once a sixth is acknowledged and a member holds records it has not acknowledged, SIGKILL
        the leader and note, at that instant, who had what."""
        with STATE_LOCK:
            acked = sum(len(m.acknowledged) for m in members)
            if acked < total // 6 or not any(m.holding for m in members):
                return False
            killed.kill()
            for m in members:
                m.abandon = bool(m.holding)
            snapshot["acked"] = set().union(*(m.acknowledged for m in members))
            snapshot["uncertain"] = set().union(*(m.uncertain | m.committing for m in members))
            snapshot["delivered"] = [len(m.delivered) for m in members]
            return True

    try:
        _loaded_topic_id([killed], group)
        produce_numbers(bootstrap, TOPIC, total)
        wait_for(killed_between_acknowledgements, 90, "the kill while a member held records")

        # 2. A survivor takes the topic partition over and the group goes on through it.
        wait_until(
            lambda: owners(postgres_cluster, database, TOPIC).get(0) not in (None, leader),
            30,
            "the topic partition taken over",
        )

        def done() -> bool:
            with STATE_LOCK:
                return len(set().union(*(m.acknowledged | m.uncertain for m in members))) >= total

        wait_for(done, 120, "every record acknowledged after the failover")
    finally:
        for member in members:
            member.close()
    _assert_counts(members, snapshot, total)
    new_leader = _leader(postgres_cluster, database)
    assert any(e.get("group") == group for e in nodes[new_leader - 1].events("share_partition.loaded"))
    state_now = owners(postgres_cluster, database, SHARE_STATE_TOPIC)[_state_partition(group, topic_id)]
    served: dict[str, int] = {}
    if state_on_the_leader:
        assert state_now not in (None, leader), "the state partition moved with the killed leader"
    else:  # the first leader's load and acknowledgements crossed nodes (the state may move at the kill too)
        served = {
            api: _requests(nodes[state_owner - 1], api)
            for api in ("ReadShareGroupState", "WriteShareGroupState")
        }
        assert served["ReadShareGroupState"] >= 1 and served["WriteShareGroupState"] > 0, served
    print(
        f"share partition leader {leader} killed, taken over by {new_leader}; state on node {state_owner}"
        f" (served {served}), after the kill on node {state_now}"
    )


def _assert_counts(members: list[Member], snapshot: dict[str, Any], total: int) -> None:
    acked_before: set[int] = snapshot["acked"]
    uncertain_before: set[int] = snapshot["uncertain"]
    delivered_before: list[int] = snapshot["delivered"]
    after = [v for m, n in zip(members, delivered_before, strict=True) for v in m.delivered[n:]]
    seen_before = {v for m, n in zip(members, delivered_before, strict=True) for v in m.delivered[:n]}
    unacked_before = seen_before - acked_before - uncertain_before
    redelivered_acked = acked_before & set(after)
    missing = unacked_before - set(after)
    print(
        f"acknowledged before the kill: {len(acked_before)}, delivered but unacknowledged: "
        f"{len(unacked_before)}, uncertain: {len(uncertain_before)}, delivered after: {len(after)}, "
        f"acknowledged again: {len(redelivered_acked)}, unacknowledged not redelivered: {len(missing)}"
    )
    assert acked_before, "nothing was acknowledged before the kill"
    assert unacked_before, "no member held unacknowledged records at the kill"
    assert redelivered_acked == set()
    assert missing == set()
    assert set().union(*(m.acknowledged | m.uncertain for m in members)) == set(range(total))


def _requests(node: KcoordProcess, api: str) -> int:
    """How many ``api`` requests the node answered."""
    return int(sum(s.value for s in metric_samples(node, "kcoord_requests_total") if s.labels["api"] == api))
