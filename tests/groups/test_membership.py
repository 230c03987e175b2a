"""Acceptance (issue 3) item 1: each real client forms, grows, shrinks and outlives a crash in a group."""

from __future__ import annotations

import time

import pytest

from tests.support import kafka_python_stall
from tests.support.group_clients import (
    HEARTBEAT_MS,
    ClientKind,
    Group,
    assert_exactly_once,
    create_and_fill,
    end_offsets,
)

# Members join, leave and die while the others consume and commit: a commit that races the
# generation bump is refused with ILLEGAL_GENERATION, as Kafka refuses it, and the member moves on.
pytestmark = [pytest.mark.clients, pytest.mark.client_errors_allow("ILLEGAL_GENERATION")]

PER_PARTITION = 50
KINDS = [
    ClientKind("kafka-python", "kafka-python", "range"),
    ClientKind("kafka-python-2", "kafka-python-2", "range"),
    ClientKind("confluent-range", "confluent", "range"),
    ClientKind("confluent-roundrobin", "confluent", "roundrobin"),
    ClientKind("confluent-cooperative-sticky", "confluent", "cooperative-sticky"),
    ClientKind("aiokafka", "aiokafka", "roundrobin"),
    ClientKind("kcat", "kcat", "range"),
    ClientKind("kafkajs", "kafkajs", "roundrobin"),
]
by_name = pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])


def form(group: Group, kind: ClientKind, session_timeout_ms: int = 6000) -> set[tuple[int, int]]:
    """Fill the topic, start five members at once and wait until they own every partition exactly once
    (a proven kafka-python stall while forming is replaced once: ``kafka_python_stall.form``)."""
    expected = create_and_fill(group.server, group.topic, group.partitions, PER_PARTITION)
    for _ in range(5):
        group.start(kind, session_timeout_ms=session_timeout_ms)
    kafka_python_stall.form(
        group,
        session_timeout_ms=session_timeout_ms,
        heartbeat_ms=HEARTBEAT_MS,
        restart=lambda _stalled: group.start(kind, session_timeout_ms=session_timeout_ms),
    )
    return expected


@by_name
def test_five_members_form_and_consume_every_message_once(group: Group, kind: ClientKind) -> None:
    """Five members subscribing at once split the ten partitions and consume every message exactly once."""
    expected = form(group, kind)
    group.wait_consumed(expected)
    # A commit refused for a rebalance is committed again by the member (confluent-kafka's driver:
    # librdkafka never retries it, and a cooperative member may keep the partitions, so nothing
    # else would commit their last offsets); each such retry must follow a refusal the server logged.
    group.wait_committed_at(end_offsets(expected))  # from here no member can read anything again
    group.proven_commit_retries()
    assert_exactly_once(group.wait_consumed(expected), expected)


@by_name
def test_sixth_member_joins_and_gets_partitions(group: Group, kind: ClientKind) -> None:
    """A sixth member joining a stable group of five gets partitions; every partition is owned once."""
    form(group, kind)
    sixth = group.start(kind)
    group.wait_balanced([*group.drivers[:5], sixth])
    assert sixth.assignment


@by_name
def test_closed_member_partitions_move_before_its_session_timeout(group: Group, kind: ClientKind) -> None:
    """A member that closes (LeaveGroup) has its partitions owned again well before its session timeout."""
    session_timeout_s = 10.0
    form(group, kind, session_timeout_ms=int(session_timeout_s * 1000))
    leaving, *staying = group.drivers
    closed_at = time.monotonic()
    leaving.close()
    balanced_at = group.wait_balanced(staying, timeout=session_timeout_s * 2)
    assert balanced_at - closed_at < session_timeout_s, f"took {balanced_at - closed_at:.1f}s"


@by_name
def test_killed_member_partitions_move_within_its_session_timeout(group: Group, kind: ClientKind) -> None:
    """A SIGKILLed member's partitions are owned again within session.timeout.ms + 2 s."""
    session_timeout_s = 6.0
    form(group, kind, session_timeout_ms=int(session_timeout_s * 1000))
    victim, *survivors = group.drivers
    killed_at = time.monotonic()
    victim.kill()
    balanced_at = group.wait_balanced(survivors, timeout=session_timeout_s * 4)
    assert balanced_at - killed_at <= session_timeout_s + 2.0, f"took {balanced_at - killed_at:.1f}s"
