"""Acceptance (issue 4) item 6c: fast failover leaves static members alone.

A static member (group.instance.id) asked to survive restarts, so kcoord keeps its full session
timeout even though its connection closed without a LeaveGroup. The test waits longer than the
fast-failover grace (about two 3 s heartbeats) before restarting the killed member, so a
wrongly shortened session would show up as a removal and a rebalance.
"""

from __future__ import annotations

import time

import pytest

from tests.failover.conftest import MakeGroup
from tests.support.failover_clients import CLIENT_HEARTBEAT_MS
from tests.support.group_clients import (
    ClientKind,
    Driver,
    create_and_fill,
    wait_heartbeat_rounds,
    wait_until,
)
from tests.support.kafka_python_stall import form_default_timing
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

KINDS = [ClientKind("kafka-python", "kafka-python"), ClientKind("confluent", "confluent")]
PARTITIONS, MEMBERS = 6, 3
SESSION_TIMEOUT_MS = 30_000
DOWN_S = 3 * CLIENT_HEARTBEAT_MS / 1000
#: Two heartbeat rounds of every member, with room for the clients' jitter and this machine's load.
HEARTBEAT_ROUNDS_WITHIN_S = 4 * CLIENT_HEARTBEAT_MS / 1000


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.slow
def test_static_member_killed_and_restarted_keeps_partitions_without_rebalance(
    kcoord: KcoordProcess, make_group: MakeGroup, kind: ClientKind
) -> None:
    """A killed static member restarted 9 s later (past the failover grace) gets back its partitions alone."""
    group = make_group(kcoord, PARTITIONS)
    create_and_fill(kcoord, group.topic, PARTITIONS, 5)
    instances: dict[str, str] = {}

    def start(instance_id: str) -> Driver:
        driver = group.start(kind, session_timeout_ms=SESSION_TIMEOUT_MS, instance_id=instance_id)
        instances[driver.name] = instance_id
        return driver

    for i in range(MEMBERS):
        start(f"static-{i}")
    form_default_timing(
        group, session_timeout_ms=SESSION_TIMEOUT_MS, restart=lambda stalled: start(instances[stalled.name])
    )
    victim, *others = list(group.drivers)
    partitions = victim.assignment
    before = group.view()
    rebalances_before = len(group.rebalances())
    log_mark = len(kcoord.logs)  # a stalled member replaced while forming was expired before this

    killed_at = time.monotonic()
    victim.kill()
    time.sleep(DOWN_S)
    comeback = group.start(kind, session_timeout_ms=SESSION_TIMEOUT_MS, instance_id="static-0")
    wait_until(lambda: bool(comeback.of_kind("assigned")), 15.0, "the comeback's assignment")
    back_s = comeback.of_kind("assigned")[0]["at"] - killed_at
    print(f"{kind.name}: static member back with its partitions {back_s:.2f}s after the kill")
    assert comeback.assignment == partitions, group.diagnose()
    answered = wait_heartbeat_rounds(kcoord, MEMBERS, 2, timeout=HEARTBEAT_ROUNDS_WITHIN_S)
    assert answered["REBALANCE_IN_PROGRESS"] == 0, answered

    for other in others:
        changes = other.of_kind("revoked", since=killed_at) + other.of_kind("assigned", since=killed_at)
        assert not changes, f"{other.name} saw {changes}\n{group.diagnose()}"
    assert len(group.rebalances()) == rebalances_before, group.rebalances()
    expired = [
        e
        for e in kcoord.logs[log_mark:]
        if (e.get("event"), e.get("group")) == ("member.expired", group.group)
    ]
    assert not expired, expired
    after = group.view()
    assert (after["state"], after["generation"]) == ("Stable", before["generation"])
    reported = comeback.of_kind("assigned")[-1]["generation"]
    assert reported in (None, before["generation"]), reported
    group.wait_balanced([comeback, *others], timeout=5.0)
