"""``kcoord groups reset-offsets``: plan new committed offsets for a group, and commit them on request.

As ``kafka-consumer-groups --reset-offsets``: the plan is printed and nothing changes unless
``--execute`` is given; the offsets are committed as a non-member (generation -1), which the
coordinator accepts only while the group is Empty, so ``--execute`` on a group with members is
refused (with Kafka's UNKNOWN_MEMBER_ID). The dry run still prints the plan for such a group, with
a note that it cannot be executed yet (Kafka's tool refuses the dry run too; the plan is harmless
and is what an operator wants to see before stopping the consumers). A group that does not exist
yet may be given offsets for named topics, which is how an operator positions a new group before
its consumers first start.

Targets are clamped to the partition's log start and end offsets, as Kafka's tool does.
``--to-datetime`` takes the first offset whose timestamp is at or after the time (ListOffsets by
timestamp), or the log end offset when no record is that late.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kcoord.cli.admin_client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, AdminClient, AdminError

Partition = tuple[str, int]
ACTIVE_STATES_REFUSED = ("Stable", "PreparingRebalance", "CompletingRebalance")


@dataclass(frozen=True, slots=True)
class PlannedReset:
    topic: str
    partition: int
    current: int | None
    new: int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The scope (``--topic`` / ``--all-topics``), exactly one target, and ``--execute``."""
    parser.add_argument("group")
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start offset")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    target.add_argument(
        "--to-datetime",
        type=parse_datetime,
        metavar="ISO8601",
        help="the first record at or after this time, e.g. 2026-01-31T12:00:00Z (no zone: local time)",
    )
    target.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be < 0)")
    parser.add_argument("--execute", action="store_true", help="commit the plan (default: only print it)")


def parse_datetime(text: str) -> int:
    """ISO 8601 to epoch milliseconds; a time without a zone is local time, as Kafka's tool reads it."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return int(moment.timestamp() * 1000)


def parse_topic_scope(items: list[str]) -> dict[str, list[int] | None]:
    """``["t", "u:0,2"]`` -> ``{"t": None, "u": [0, 2]}`` (``None``: every partition)."""
    scope: dict[str, list[int] | None] = {}
    for item in items:
        topic, sep, parts = item.partition(":")
        if not topic:
            raise AdminError(f"--topic {item!r}: expected TOPIC or TOPIC:P,P,...")
        if not sep:
            scope[topic] = None
            continue
        try:
            partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
        except ValueError:
            raise AdminError(f"--topic {item!r}: partitions must be integers, e.g. {topic}:0,1") from None
        if not partitions:
            raise AdminError(f"--topic {item!r}: no partitions after ':'")
        scope[topic] = partitions
    return scope


def active_group_problem(group_id: str, state: str, members: int) -> str | None:
    """Why the group's offsets cannot be committed now, or None when they can."""
    if state in ACTIVE_STATES_REFUSED or members:
        return (
            f"group {group_id!r} is {state} with {members} member(s): offsets can only be "
            "reset while it has none (the coordinator answers UNKNOWN_MEMBER_ID); stop its consumers first"
        )
    return None


def run(args: argparse.Namespace, client: AdminClient) -> tuple[list[PlannedReset], str | None]:
    """Check the group, plan every partition, and commit when ``--execute``; returns the plan and,
    for a dry run of a group with members, why it cannot be executed yet."""
    group = client.describe_group(args.group)
    problem = active_group_problem(args.group, str(group.group_state), len(group.members))
    if problem is not None and args.execute:
        raise AdminError(problem)
    committed = client.group_offsets(args.group).committed
    partitions = _partitions(args, client, committed)
    plan = plan_resets(args, client, partitions, committed)
    if args.execute and plan:
        client.commit_offsets(args.group, {(p.topic, p.partition): p.new for p in plan})
    return plan, problem


def _partitions(
    args: argparse.Namespace, client: AdminClient, committed: dict[Partition, int]
) -> list[Partition]:
    if args.all_topics:
        if not committed:
            raise AdminError(f"group {args.group!r} has no committed offsets; name the topics with --topic")
        return sorted(committed)
    scope = parse_topic_scope(args.topic)
    counts = client.partition_counts(sorted(scope))
    chosen: list[Partition] = []
    for topic, wanted in scope.items():
        count = counts[topic]
        for partition in wanted if wanted is not None else range(count):
            if not 0 <= partition < count:
                raise AdminError(f"topic {topic!r} has no partition {partition} (it has {count})")
            chosen.append((topic, partition))
    return sorted(chosen)


def plan_resets(
    args: argparse.Namespace,
    client: AdminClient,
    partitions: list[Partition],
    committed: dict[Partition, int],
) -> list[PlannedReset]:
    """The new offset of each partition for the one target given."""
    earliest = client.list_offsets(partitions, EARLIEST_TIMESTAMP)
    latest = client.list_offsets(partitions, LATEST_TIMESTAMP)
    by_time = client.list_offsets(partitions, args.to_datetime) if args.to_datetime is not None else {}
    plan = []
    for key in partitions:
        if key not in earliest or key not in latest:
            raise AdminError(f"no offsets for {key[0]}-{key[1]}")
        low, high = earliest[key], latest[key]
        current = committed.get(key)
        wanted = _target(args, key, current, low, high, by_time)
        plan.append(PlannedReset(key[0], key[1], current, min(max(wanted, low), high)))
    return plan


def _target(
    args: argparse.Namespace,
    key: Partition,
    current: int | None,
    low: int,
    high: int,
    by_time: dict[Partition, int],
) -> int:
    if args.to_earliest:
        return low
    if args.to_latest:
        return high
    if args.to_offset is not None:
        return int(args.to_offset)
    if args.to_datetime is not None:
        found = by_time.get(key, -1)
        return high if found < 0 else found
    if current is None:
        raise AdminError(f"{key[0]}-{key[1]} has no committed offset to shift from; use another target")
    return current + int(args.shift_by)


def plan_rows(group: str, plan: list[PlannedReset]) -> list[dict[str, Any]]:
    return [
        {
            "group": group,
            "topic": p.topic,
            "partition": p.partition,
            "current_offset": p.current,
            "new_offset": p.new,
        }
        for p in plan
    ]
