"""``kcoord groups reset-offsets`` and ``groups delete`` against a live server and confluent-kafka
group consumers: every target, dry run then execute, and the consumers resume where it says."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kcoord.cli import main
from kcoord.cli.admin_client import AdminClient, AdminError
from tests.cli.reset_scenario import (
    PARTITIONS,
    RECORDS,
    STEP_MS,
    FilledTopic,
    append,
    committed,
    fill_topic,
    first_offsets_resumed,
    group_consumer,
    wait_until_assigned,
)
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

SEEDED = 5
_names = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KcoordProcess]:
    process = KcoordProcess(Path(tmp_path_factory.mktemp("reset")) / "data").start()
    try:
        yield process
    finally:
        process.kill()


def cli(server: KcoordProcess, *args: str) -> int:
    return main([*args, "--bootstrap", server.bootstrap])


def seeded_group(server: KcoordProcess, capsys: pytest.CaptureFixture[str]) -> tuple[FilledTopic, str]:
    """A filled topic and a new group positioned at offset 5 on each partition."""
    n = next(_names)
    topic, group = fill_topic(server.bootstrap, f"reset-topic-{n}"), f"reset-group-{n}"
    seed = ["groups", "reset-offsets", group, "--topic", topic.name, "--to-offset", str(SEEDED), "--execute"]
    assert cli(server, *seed) == 0
    capsys.readouterr()
    return topic, group


def both(topic: str, offset: int) -> dict[tuple[str, int], int]:
    return {(topic, p): offset for p in range(PARTITIONS)}


def to_iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (["--to-earliest"], 0),
        (["--to-offset", "3"], 3),
        (["--to-offset", "99"], RECORDS),
        (["--shift-by", "-2"], SEEDED - 2),
        (["--shift-by", "100"], RECORDS),
        (["--to-datetime"], 7),
        (["--to-latest"], RECORDS),
    ],
    ids=["earliest", "offset", "offset-clamped", "shift-back", "shift-clamped", "datetime", "latest"],
)
def test_each_target_dry_run_then_execute_then_consumers_resume_there(
    server: KcoordProcess, capsys: pytest.CaptureFixture[str], target: list[str], expected: int
) -> None:
    """A dry run prints the plan and changes nothing; --execute commits it; real consumers resume there."""
    topic, group = seeded_group(server, capsys)
    if target == ["--to-datetime"]:
        # Half a second before record 7 (each record its own batch): the first at or after it is 7.
        target = ["--to-datetime", to_iso(topic.timestamp_of(7) - STEP_MS // 2)]
    command = ["groups", "reset-offsets", group, "--topic", topic.name, *target]

    assert cli(server, *command) == 0
    assert "Dry run: nothing was changed; add --execute" in capsys.readouterr().out
    assert cli(server, *command, "--json") == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["executed"] is False
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in plan["partitions"]] == [
        (p, SEEDED, expected) for p in range(PARTITIONS)
    ]
    assert committed(server.bootstrap, group) == both(topic.name, SEEDED)

    assert cli(server, *command, "--execute") == 0
    assert f"Committed {PARTITIONS} offset(s) for group {group}." in capsys.readouterr().out
    assert committed(server.bootstrap, group) == both(topic.name, expected)

    if expected == RECORDS:
        append(server.bootstrap, topic, range(RECORDS, RECORDS + 1))
    resumed = first_offsets_resumed(server.bootstrap, group, topic.name)
    assert resumed == dict.fromkeys(range(PARTITIONS), expected)


def test_all_topics_and_a_partition_subset(server: KcoordProcess, capsys: pytest.CaptureFixture[str]) -> None:
    """``--topic T:1`` moves only partition 1; ``--all-topics`` moves every partition with an offset."""
    topic, group = seeded_group(server, capsys)
    assert (
        cli(
            server,
            "groups",
            "reset-offsets",
            group,
            "--topic",
            f"{topic.name}:1",
            "--to-offset",
            "2",
            "--execute",
        )
        == 0
    )
    assert committed(server.bootstrap, group) == {(topic.name, 0): SEEDED, (topic.name, 1): 2}
    assert cli(server, "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute") == 0
    assert committed(server.bootstrap, group) == both(topic.name, 0)


def test_refused_while_the_group_has_members(
    server: KcoordProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a live consumer the dry run prints its plan with a note that it cannot be executed yet,
    --execute is refused, and the coordinator itself answers UNKNOWN_MEMBER_ID."""
    topic, group = seeded_group(server, capsys)
    consumer = group_consumer(server.bootstrap, group, topic.name)
    try:
        wait_until_assigned(consumer)
        dry_run = ["groups", "reset-offsets", group, "--topic", topic.name, "--to-earliest", "--json"]
        assert cli(server, *dry_run) == 0
        printed = capsys.readouterr()
        planned = json.loads(printed.out)
        assert planned["executed"] is False
        planned_offsets = {
            (row["topic"], row["partition"]): row["new_offset"] for row in planned["partitions"]
        }
        assert planned_offsets == both(topic.name, 0)
        assert f"--execute would be refused now: group {group!r} is Stable with 1 member(s)" in printed.err
        command = ["groups", "reset-offsets", group, "--topic", topic.name, "--to-earliest", "--execute"]
        assert cli(server, *command) == 1
        err = capsys.readouterr().err
        assert f"kcoord: group {group!r} is Stable with 1 member(s)" in err and "UNKNOWN_MEMBER_ID" in err
        host, _, port = server.bootstrap.rpartition(":")
        with AdminClient(host, int(port)) as client, pytest.raises(AdminError, match="UNKNOWN_MEMBER_ID"):
            client.commit_offsets(group, both(topic.name, 0))
        assert committed(server.bootstrap, group) == both(topic.name, SEEDED)
        assert cli(server, "groups", "delete", group) == 1
        assert "still has members (NON_EMPTY_GROUP)" in capsys.readouterr().err
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "no-such-topic", "--to-earliest"], "UNKNOWN_TOPIC_OR_PARTITION"),
        (["--topic", "{topic}:7", "--to-earliest"], "has no partition 7 (it has 2)"),
        (["--topic", "{topic}:x", "--to-earliest"], "partitions must be integers"),
        (["--all-topics", "--to-earliest"], "has no committed offsets; name the topics with --topic"),
    ],
    ids=["unknown-topic", "unknown-partition", "bad-partition", "all-topics-without-offsets"],
)
def test_bad_scopes_exit_one_with_a_message(
    server: KcoordProcess, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """A scope that names nothing real exits 1 and says what is wrong; nothing is committed."""
    topic = fill_topic(server.bootstrap, f"reset-bad-{next(_names)}")
    group = f"reset-bad-group-{next(_names)}"
    args = [a.replace("{topic}", topic.name) for a in args]
    assert cli(server, "groups", "reset-offsets", group, *args, "--execute") == 1
    assert message in capsys.readouterr().err
    assert committed(server.bootstrap, group) == {}


@pytest.mark.parametrize(
    "args",
    [
        ["--topic", "t"],
        ["--topic", "t", "--to-earliest", "--to-latest"],
        ["--to-datetime", "yesterday", "--topic", "t"],
    ],
    ids=["no-target", "two-targets", "bad-datetime"],
)
def test_bad_arguments_exit_two(server: KcoordProcess, args: list[str]) -> None:
    """A missing or doubled target, or a time that is not ISO 8601, is a usage error (exit 2)."""
    with pytest.raises(SystemExit) as exited:
        cli(server, "groups", "reset-offsets", "g", *args)
    assert exited.value.code == 2


def test_delete_then_describe_and_unknown_groups(
    server: KcoordProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """Deleting an empty group removes its offsets; describing or deleting an unknown group exits 1."""
    topic, group = seeded_group(server, capsys)
    assert cli(server, "groups", "describe", group) == 0
    capsys.readouterr()
    assert cli(server, "groups", "delete", group) == 0
    assert capsys.readouterr().out.strip() == f"Deleted group {group}"
    assert committed(server.bootstrap, group) == {}
    assert cli(server, "groups", "describe", group) == 1
    assert capsys.readouterr().err.strip() == f"kcoord: unknown group {group!r}"
    assert cli(server, "groups", "delete", group) == 1
    assert capsys.readouterr().err.strip() == f"kcoord: unknown group {group!r}"
    assert first_offsets_resumed(server.bootstrap, group, topic.name) == dict.fromkeys(range(PARTITIONS), 0)
