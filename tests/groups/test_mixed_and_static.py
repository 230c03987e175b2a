"""Acceptance (issue 3) items 2 and 4: groups mixing client libraries, and static members that come back."""

from __future__ import annotations

import time

import pytest

from tests.support import kafka_python_stall
from tests.support.group_clients import (
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    ClientKind,
    Driver,
    Group,
    append,
    assert_exactly_once,
    create_and_fill,
    end_offsets,
    wait_heartbeat_rounds,
    wait_until,
)

pytestmark = pytest.mark.clients

PER_PARTITION = 50
KAFKA_PYTHON = ClientKind("kafka-python", "kafka-python")
CONFLUENT = ClientKind("confluent", "confluent")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (ClientKind("kafka-python", "kafka-python", "range"), ClientKind("confluent", "confluent", "range")),
        (
            ClientKind("kafka-python", "kafka-python", "roundrobin"),
            ClientKind("aiokafka", "aiokafka", "roundrobin"),
        ),
    ],
    ids=["kafka-python+confluent-range", "kafka-python+aiokafka-roundrobin"],
)
def test_mixed_clients_share_one_group(group: Group, first: ClientKind, second: ClientKind) -> None:
    """Two client libraries with a common assignor form one group that consumes every message exactly once."""
    expected = create_and_fill(group.server, group.topic, group.partitions, PER_PARTITION)
    group.start_many([first, second, first, second])
    kafka_python_stall.form(group, session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_ms=HEARTBEAT_MS)
    owners = {d.kind.client for d in group.drivers if d.assignment}
    assert owners == {first.client, second.client}, "one library was left without partitions"
    expected |= append(group.server, group.topic, range(group.partitions), PER_PARTITION)
    group.wait_consumed(expected)
    group.wait_committed_at(end_offsets(expected))  # from here no member can read anything again
    assert_exactly_once(group.wait_consumed(expected), expected)


@pytest.mark.parametrize("kind", [KAFKA_PYTHON, CONFLUENT], ids=lambda k: k.name)
def test_static_member_restart_keeps_generation_and_partitions(group: Group, kind: ClientKind) -> None:
    """A static member restarted within its session timeout gets its partitions back without a rebalance."""
    session_timeout_ms = 15_000
    create_and_fill(group.server, group.topic, group.partitions, PER_PARTITION)
    instances: dict[str, str] = {}

    def start(instance_id: str) -> Driver:
        driver = group.start(kind, session_timeout_ms=session_timeout_ms, instance_id=instance_id)
        instances[driver.name] = instance_id
        return driver

    for i in range(3):
        start(f"static-{i}")
    kafka_python_stall.form(
        group,
        session_timeout_ms=session_timeout_ms,
        heartbeat_ms=HEARTBEAT_MS,
        restart=lambda stalled: start(instances[stalled.name]),
    )
    members = list(group.drivers)
    victim, *others = members
    partitions = victim.assignment
    generation = victim.of_kind("assigned")[-1]["generation"]
    preparing_before = rebalances(group)

    killed_at = time.monotonic()
    victim.kill()
    comeback = group.start(kind, session_timeout_ms=session_timeout_ms, instance_id="static-0")
    wait_until(
        lambda: bool(comeback.of_kind("assigned")), session_timeout_ms / 1000, "the comeback's assignment"
    )
    elapsed = time.monotonic() - killed_at
    assert elapsed < session_timeout_ms / 1000, f"the comeback took {elapsed:.1f}s, past the session timeout"
    assert comeback.assignment == partitions
    if generation is not None:
        assert comeback.of_kind("assigned")[-1]["generation"] == generation
    # Two answered heartbeat rounds: a rebalance pending would have been answered REBALANCE_IN_PROGRESS.
    answered = wait_heartbeat_rounds(group.server, len(members), 2, timeout=10 * HEARTBEAT_MS / 1000)
    assert answered["REBALANCE_IN_PROGRESS"] == 0, answered
    for other in others:
        changes = other.of_kind("revoked", since=killed_at) + other.of_kind("assigned", since=killed_at)
        assert not changes, f"{other.name} saw {changes}"
    assert rebalances(group) == preparing_before, "the coordinator started a rebalance"
    group.wait_balanced([comeback, *others], timeout=5.0)


def rebalances(group: Group) -> int:
    """How many rebalances the server has logged for this group (its ``rebalance.preparing`` lines)."""
    return sum(1 for e in group.server.events("rebalance.preparing") if e.get("group") == group.group)
