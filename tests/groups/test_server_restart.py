"""Acceptance (issue 3) item 3: a group outlives a SIGKILLed server and resumes from its committed offsets."""

from __future__ import annotations

import time

import pytest

from kcoord.protocol.api_keys import ApiKey
from tests.support import kafka_python_stall
from tests.support.client_errors import SERVER_UNREACHABLE
from tests.support.group_clients import (
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    ClientKind,
    Group,
    append,
    create_and_fill,
    end_offsets,
    wait_until,
)
from tests.support.raw_client import RawClient
from tests.support.raw_ops import commit_body, create_topic

pytestmark = pytest.mark.clients

PER_PARTITION = 50
KINDS = [
    ClientKind("kafka-python", "kafka-python", "range"),
    ClientKind("confluent", "confluent", "range"),
    ClientKind("aiokafka", "aiokafka", "roundrobin"),
]


def form(group: Group, kind: ClientKind) -> None:
    """Wait until the members own every partition once (a proven kafka-python stall while forming is
    replaced once: ``kafka_python_stall.form``)."""
    kafka_python_stall.form(
        group,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_ms=HEARTBEAT_MS,
        restart=lambda _stalled: group.start(kind),
    )


def committed(group: Group) -> dict[int, int]:
    """The highest offset each partition was committed at, as the members reported their commits."""
    highest: dict[int, int] = {}
    for driver in group.drivers:
        for partition, offset in list(driver.committed.items()):
            highest[partition] = max(offset, highest.get(partition, -1))
    return highest


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_group_resumes_from_committed_offsets_after_server_kill(group: Group, kind: ClientKind) -> None:
    """After a server SIGKILL and restart no committed offset is lost and nothing before one is re-read."""
    expected = create_and_fill(group.server, group.topic, group.partitions, PER_PARTITION)
    group.start_many([kind] * 3)
    form(group, kind)
    group.wait_consumed(expected)
    all_committed = dict.fromkeys(range(group.partitions), PER_PARTITION)
    wait_until(lambda: committed(group) == all_committed, 15.0, "every partition committed at its end")

    restarted_at = time.monotonic()
    # The server is down: the fault lasts until the members consumed what came after.
    with group.fault_window(also=SERVER_UNREACHABLE):
        group.server.restart()
        more = append(group.server, group.topic, range(group.partitions), 20)
        group.wait_consumed(expected | more, timeout=60.0)

    again = [
        (partition, offset)
        for driver in group.drivers
        for event in driver.of_kind("consumed", since=restarted_at)
        for partition, offset in event["records"]
        if offset < all_committed[partition]
    ]
    assert not again, f"{len(again)} messages before a committed offset were consumed again, e.g. {again[:5]}"
    final = dict.fromkeys(range(group.partitions), PER_PARTITION + 20)
    wait_until(lambda: committed(group) == final, 15.0, "the new messages committed after the restart")


@pytest.mark.parametrize("kind", KINDS[:2], ids=lambda k: k.name)
def test_new_members_read_offsets_committed_before_server_kill(group: Group, kind: ClientKind) -> None:
    """Offsets committed before a server SIGKILL are read by new members: they consume only the new."""
    expected = create_and_fill(group.server, group.topic, group.partitions, PER_PARTITION)
    group.start_many([kind] * 2)
    form(group, kind)
    group.wait_consumed(expected)
    all_committed = dict.fromkeys(range(group.partitions), PER_PARTITION)
    wait_until(lambda: committed(group) == all_committed, 15.0, "every partition committed at its end")
    for driver in group.drivers:
        driver.close()
    # What the coordinator answers now is what the new members must start from: a re-read below is
    # then a commit lost by the restart (or a member starting before its offset), not a late commit.
    acknowledged = group.committed_on_server()
    assert acknowledged == all_committed, f"before the kill the coordinator answered {acknowledged}"

    group.server.restart()
    more = append(group.server, group.topic, range(group.partitions), 10)
    group.start_many([kind] * 2)
    form(group, kind)
    newcomers = group.live
    # Each partition is fetched in order, so a newcomer starting before its committed offset
    # would have consumed (and reported) the old messages before these new ones.
    group.wait_consumed(more, timeout=30.0)
    reread = sorted(pair for d in newcomers for pair in d.consumed if pair not in more)
    started_at = dict(reversed(reread))  # each partition's lowest re-read offset
    assert not reread, f"{len(reread)} committed messages were consumed again; re-read from {started_at}"


#: Offset commits written to the group's offsets partition before the kill, so that its replay after
#: the restart lasts seconds (about 3 s here) and new members certainly arrive while it loads.
PADDING_PARTITIONS = 1000
PADDING_COMMITS = 600
PADDING_IN_FLIGHT = 50


def commit_with_padding(group: Group, ends: dict[int, int]) -> None:
    """Commit ``ends`` for the group, then PADDING_COMMITS commits of a padding topic's partitions
    (pipelined, every answer checked): the offsets partition the restart must replay."""
    padding = f"{group.topic}-padding"
    with RawClient(group.server.host, group.server.port, timeout=60, client_id="padding") as raw:
        assert create_topic(raw, padding, PADDING_PARTITIONS) == 0
        answer = raw.call(ApiKey.OFFSET_COMMIT, 8, commit_body(group.group, group.topic, ends))
        assert {int(p.error_code) for t in answer.topics for p in t.partitions} == {0}
        frame = raw.encode(
            ApiKey.OFFSET_COMMIT,
            8,
            commit_body(group.group, padding, dict.fromkeys(range(PADDING_PARTITIONS), 1)),
            1,
        )
        for _ in range(PADDING_COMMITS // PADDING_IN_FLIGHT):
            for _ in range(PADDING_IN_FLIGHT):
                raw.send_raw(frame)
            for _ in range(PADDING_IN_FLIGHT):
                answer = raw.recv(ApiKey.OFFSET_COMMIT, 8)
                assert {int(p.error_code) for t in answer.topics for p in t.partitions} == {0}


@pytest.mark.slow
def test_members_joining_while_offsets_load_after_kill_start_at_committed_offsets(group: Group) -> None:
    """New members that join while a SIGKILLed server still replays its offsets partition are held off
    (COORDINATOR_LOAD_IN_PROGRESS) and then start at the committed offsets: they consume only the new."""
    kind = KINDS[1]
    expected = create_and_fill(group.server, group.topic, group.partitions, PER_PARTITION)
    ends = end_offsets(expected)
    commit_with_padding(group, ends)
    group.wait_committed_at(ends)

    group.server.restart()
    group.start_many([kind] * 2)
    more = append(group.server, group.topic, range(group.partitions), 10)
    form(group, kind)
    group.wait_consumed(more, timeout=30.0)
    reread = sorted(pair for d in group.drivers for pair in d.consumed if pair not in more)
    started_at = dict(reversed(reread))  # each partition's lowest re-read offset
    assert not reread, f"{len(reread)} committed messages were consumed again; re-read from {started_at}"
    held_off = [
        event
        for event in group.server.events("request.answered_with_errors")
        if str(event.get("client_id")).startswith(kind.name)
        and "coordinator_load_in_progress" in event.get("errors", ())
    ]
    assert held_off, "no member arrived while the offsets partition loaded: the scenario did not happen"
