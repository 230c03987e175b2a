"""Acceptance (issue 4) item 6b: a consumer whose connections are cut, but which lives, keeps its place.

Fast failover treats a closed connection only as a hint. A member that reconnects and heartbeats
within the shortened grace (about two heartbeat intervals) must not be removed and must not
cause a rebalance. The members bootstrap through a TCP proxy, kcoord advertises the proxy's
address, and the test closes both sides of the proxied connections once the group is Stable.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.failover.conftest import MakeGroup
from tests.support.client_errors import SERVER_UNREACHABLE
from tests.support.group_clients import ClientKind, append, create_and_fill, wait_until
from tests.support.kafka_python_stall import DEBUG_LOG, form_default_timing
from tests.support.server import KcoordProcess
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.clients

KINDS = [ClientKind("kafka-python", "kafka-python"), ClientKind("confluent", "confluent")]
PARTITIONS, MEMBERS = 4, 2
WATCH_AFTER_CUT_S = 15.0
MEMBERSHIP_EVENTS = ("member.expired", "member.removed", "member.left", "rebalance.preparing")


@pytest.mark.parametrize("coordinator_only", [False, True], ids=["all-connections", "coordinator-only"])
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.slow
def test_cut_connections_reconnect_without_rebalance(
    kcoord_factory: type[KcoordProcess],
    tmp_path: Path,
    proxy: TcpProxy,
    make_group: MakeGroup,
    kind: ClientKind,
    coordinator_only: bool,
) -> None:
    """Members whose connections are cut reconnect and keep generation and partitions; no rebalance starts."""
    server = kcoord_factory(
        tmp_path / "data", DEBUG_LOG, extra_args=["--advertised-listener", proxy.address]
    ).start()
    proxy.start(server.port)
    group = make_group(server, PARTITIONS, bootstrap=proxy.address)
    expected = create_and_fill(server, group.topic, PARTITIONS, 5)
    for _ in range(MEMBERS):
        group.start(kind)
    form_default_timing(group)
    members = list(group.drivers)
    group.wait_consumed(expected)
    before = group.view()
    assert before["state"] == "Stable", before
    assignments = {d.name: d.assignment for d in members}
    log_mark = len(server.logs)

    cut_at = time.monotonic()
    # The cut is the fault; it lasts until every member consumed what came after it.
    with group.fault_window(also=SERVER_UNREACHABLE):
        cut = proxy.cut(coordinator_only=coordinator_only)
        assert sum(c.is_coordinator for c in cut) >= MEMBERS, [sorted(c.api_keys) for c in cut]
        wait_until(
            lambda: sum(c.is_coordinator for c in proxy.open_connections()) >= MEMBERS,
            10.0,
            "every member to heartbeat on a new coordinator connection",
        )
        expected |= append(server, group.topic, range(PARTITIONS), 5)
        group.wait_consumed(expected, timeout=10.0)

    while time.monotonic() < cut_at + WATCH_AFTER_CUT_S:
        assert {d.name: d.assignment for d in members} == assignments, group.diagnose()
        time.sleep(0.2)
    for driver in members:
        changes = driver.of_kind("revoked", since=cut_at) + driver.of_kind("assigned", since=cut_at)
        assert driver.alive and not changes, f"{driver.name} saw {changes}\n{group.diagnose()}"
    after = group.view()
    assert (after["state"], after["generation"]) == (before["state"], before["generation"])
    assert member_ids(after) == member_ids(before)
    membership = [e for e in server.logs[log_mark:] if e.get("event") in MEMBERSHIP_EVENTS]
    assert not membership, membership
    print(f"{kind.name}: cut {len(cut)} connections, generation {after['generation']} kept")


def member_ids(view: dict[str, Any]) -> set[str]:
    return {str(member["member_id"]) for member in view["members"]}


# kafka-python 3.0.12 raises KafkaConnectionError out of poll() when no broker answers its metadata
# refresh, which ends the driver; so it is only cut off from its coordinator.
@pytest.mark.parametrize(
    ("kind", "coordinator_only"),
    [(KINDS[0], True), (KINDS[1], False)],
    ids=["kafka-python-coordinator-only", "confluent-all-connections"],
)
# The victim was replaced while cut off: back, it is told UNKNOWN_MEMBER_ID and rejoins (what this pins).
@pytest.mark.client_errors_allow("UNKNOWN_MEMBER_ID")
@pytest.mark.slow
def test_partitioned_consumer_is_replaced_fast_and_rejoins_when_healed(
    kcoord_factory: type[KcoordProcess],
    tmp_path: Path,
    proxy: TcpProxy,
    make_group: MakeGroup,
    kind: ClientKind,
    coordinator_only: bool,
) -> None:
    """A live member cut off from kcoord loses its partitions in under 10 s and rejoins once reachable."""
    server = kcoord_factory(
        tmp_path / "data", DEBUG_LOG, extra_args=["--advertised-listener", proxy.address]
    ).start()
    proxy.start(server.port)
    group = make_group(server, 6, bootstrap=proxy.address)
    create_and_fill(server, group.topic, group.partitions, 5)
    for _ in range(3):
        group.start(kind)
    form_default_timing(group)
    victim, *survivors = group.drivers
    orphaned = set(victim.assignment or ())

    partitioned_at = time.monotonic()
    # The partition is the fault; it lasts until the healed victim is back in a balanced group.
    with group.fault_window(also=SERVER_UNREACHABLE):
        assert any(c.is_coordinator for c in proxy.partition(victim.name, coordinator_only=coordinator_only))
        group.wait_balanced(survivors, timeout=20.0)
        failover_s = group.all_owned_at(orphaned, since=partitioned_at) - partitioned_at
        assert victim.alive, group.diagnose()
        assert failover_s < 10.0, f"took {failover_s:.2f}s\n{group.diagnose()}"
        assert group.rebalances()[-1]["trigger"] == "member_disconnected", group.rebalances()

        proxy.heal(victim.name)
        healed_at = time.monotonic()
        rejoined_at = group.wait_balanced([victim, *survivors], timeout=30.0)
    print(
        f"{kind.name}: partitioned member replaced after {failover_s:.2f}s,"
        f" back in the group {rejoined_at - healed_at:.2f}s after healing"
    )
