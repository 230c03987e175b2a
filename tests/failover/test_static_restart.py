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
from tests.support.group_clients import ClientKind, create_and_fill, wait_heartbeat_rounds, wait_until
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
    members = [
        group.start(kind, session_timeout_ms=SESSION_TIMEOUT_MS, instance_id=f"static-{i}")
        for i in range(MEMBERS)
    ]
    group.wait_balanced()
    victim, *others = members
    partitions = victim.assignment
    before = group.view()
    rebalances_before = len(group.rebalances())

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
    assert not [e for e in kcoord.events("member.expired") if e.get("group") == group.group]
    after = group.view()
    assert (after["state"], after["generation"]) == ("Stable", before["generation"])
    reported = comeback.of_kind("assigned")[-1]["generation"]
    assert reported in (None, before["generation"]), reported
    group.wait_balanced([comeback, *others], timeout=5.0)
