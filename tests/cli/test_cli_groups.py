"""The ``kcoord groups`` / ``kcoord health`` command line without a server: rows, exit codes, parsing."""

from __future__ import annotations

import argparse
import json
import socket
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from kcoord.cli import main
from kcoord.cli.groups import _print_consumer_group, describe_rows
from kcoord.coordinator.classic.consumer_protocol import ConsumerAssignment, encode_assignment


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    member_assignment: bytes


@dataclass
class Group:
    protocol_type: str
    members: list[Member]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_describe_rows_join_assignments_with_committed_and_log_end_offsets() -> None:
    """Each assigned or committed partition becomes one row with its owner, offsets and lag."""
    owned = encode_assignment(ConsumerAssignment(0, (("t", (0, 1)),)))
    group = Group("consumer", [Member("m-1", "app", "/127.0.0.1", owned)])
    rows = describe_rows(group, {("t", 0): 4, ("t", 2): 9}, {("t", 0): 10, ("t", 1): 3, ("t", 2): 9})
    assert [(r["partition"], r["current_offset"], r["lag"], r["consumer_id"]) for r in rows] == [
        (0, 4, 6, "m-1"),
        (1, None, None, "m-1"),
        (2, 9, 0, None),
    ]


def test_a_consumer_group_prints_its_partition_table(capsys: pytest.CaptureFixture[str]) -> None:
    """A KIP-848 group's text description: a title line, then one table row per partition."""
    partitions = SimpleNamespace(topic_name="t", partitions=[0])
    member = SimpleNamespace(
        member_id="m-1",
        instance_id=None,
        client_id="app",
        client_host="/127.0.0.1",
        member_epoch=3,
        assignment=SimpleNamespace(topic_partitions=[partitions]),
        target_assignment=SimpleNamespace(topic_partitions=[partitions]),
    )
    group = SimpleNamespace(
        group_state="Stable", group_epoch=3, assignment_epoch=3, assignor_name="uniform", members=[member]
    )
    args = argparse.Namespace(group="g", json=False)
    assert _print_consumer_group(args, group, {("t", 0): 4}, {("t", 0): 10}) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[0]
        == "Group g: Stable, consumer protocol (KIP-848), group epoch 3, assignor uniform, 1 member(s)"
    )
    assert lines[2].split() == [
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert lines[3].split() == ["t", "0", "4", "10", "6", "m-1", "/127.0.0.1", "app"]
    assert lines[5].split() == ["MEMBER-ID", "PROTOCOL", "EPOCH", "CLIENT-ID", "HOST"]
    assert lines[6].split() == ["m-1", "-", "3", "app", "/127.0.0.1"]


def test_a_migrating_group_shows_each_members_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    """ConsumerGroupDescribe v1's member_type names the classic members of a migrating group."""
    empty = SimpleNamespace(topic_partitions=[])

    def member(member_id: str, member_type: int) -> SimpleNamespace:
        return SimpleNamespace(
            member_id=member_id,
            instance_id=None,
            client_id="app",
            client_host="/127.0.0.1",
            member_epoch=5,
            member_type=member_type,
            assignment=empty,
            target_assignment=empty,
        )

    group = SimpleNamespace(
        group_state="Stable",
        group_epoch=5,
        assignment_epoch=5,
        assignor_name="uniform",
        members=[member("old", 0), member("new", 1)],
    )
    assert _print_consumer_group(argparse.Namespace(group="g", json=True), group, {}, {}) == 0
    described = json.loads(capsys.readouterr().out)
    assert [(m["member_id"], m["protocol"]) for m in described["members"]] == [
        ("old", "classic"),
        ("new", "consumer"),
    ]
    assert _print_consumer_group(argparse.Namespace(group="g", json=False), group, {}, {}) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[-2:]] == [["old", "classic"], ["new", "consumer"]]


def test_health_exits_one_when_nothing_listens(capsys: pytest.CaptureFixture[str]) -> None:
    """``kcoord health`` against a closed port fails with exit code 1 and says why."""
    assert main(["health", "--bootstrap", f"127.0.0.1:{closed_port()}", "--timeout", "1"]) == 1
    assert "cannot connect" in capsys.readouterr().err


def test_history_exits_one_when_the_endpoint_is_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    """``kcoord groups history`` reports an unreachable HTTP endpoint with exit code 1."""
    assert main(["groups", "history", "g", "--metrics", f"127.0.0.1:{closed_port()}"]) == 1
    assert "kcoord:" in capsys.readouterr().err


def test_config_show_still_lists_the_metrics_listener(capsys: pytest.CaptureFixture[str]) -> None:
    """``kcoord config show --metrics-listen`` keeps working next to the new subcommands."""
    assert main(["config", "show", "--metrics-listen", "127.0.0.1:0"]) == 0
    assert "kcoord.metrics.listen = 127.0.0.1:0" in capsys.readouterr().out
