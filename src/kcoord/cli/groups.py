"""``kcoord groups list|describe|history|delete|reset-offsets`` and ``kcoord health``.

``list``, ``describe``, ``delete`` and ``reset-offsets`` speak the Kafka protocol to ``--bootstrap``
(so they work against any Kafka broker too); ``history`` reads the rebalance history from kcoord's
HTTP endpoint (``--metrics``). ``--json`` prints what the table shows as JSON. ``health`` exits 0 when an
ApiVersions round trip succeeds, 1 otherwise (the container HEALTHCHECK uses it).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec
from urllib.parse import quote

from kcoord.cli import reset_offsets
from kcoord.cli.admin_client import AdminClient, AdminError
from kcoord.cli.client_config import add_command_config_argument, client_security
from kcoord.cli.consumer_groups import (
    MEMBER_HEADERS,
    assigned_partitions,
    consumer_members,
    consumer_rows,
    member_rows,
)
from kcoord.cli.http_endpoint import get_json, url_for
from kcoord.cli.partition_rows import PARTITION_HEADERS, partition_rows
from kcoord.cli.share_groups import print_share_group
from kcoord.config import parse_host_port
from kcoord.observability.group_views import decode_member_assignment

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_METRICS = "127.0.0.1:9644"
EXIT_FAILED = 1

_P = ParamSpec("_P")


def reports_admin_errors(command: Callable[_P, int]) -> Callable[_P, int]:
    """A command whose :class:`AdminError` ends it with ``kcoord: <reason>`` on stderr and exit status 1."""

    @functools.wraps(command)
    def reporting(*args: _P.args, **kwargs: _P.kwargs) -> int:
        try:
            return command(*args, **kwargs)
        except AdminError as exc:
            print(f"kcoord: {exc}", file=sys.stderr)
            return EXIT_FAILED

    return reporting


def add_commands(commands: Any) -> None:
    """Add ``groups`` and ``health`` to the top-level subparsers."""
    groups = commands.add_parser("groups", help="inspect consumer groups")
    group_commands = groups.add_subparsers(dest="groups_command", required=True)
    listing = group_commands.add_parser("list", help="every group with its state")
    describe = group_commands.add_parser("describe", help="members, assignments, offsets and lag")
    describe.add_argument("group")
    history = group_commands.add_parser("history", help="the group's last rebalances")
    history.add_argument("group")
    history.add_argument(
        "--metrics", metavar="HOST:PORT", default=DEFAULT_METRICS, help="kcoord HTTP endpoint"
    )
    add_command_config_argument(history)
    delete = group_commands.add_parser("delete", help="delete an empty group and its committed offsets")
    delete.add_argument("group")
    reset = group_commands.add_parser(
        "reset-offsets",
        help="move an inactive group's committed offsets (prints the plan; --execute applies it)",
        description=(reset_offsets.__doc__ or "").replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reset_offsets.add_arguments(reset)
    for parser in (listing, describe, history, reset):
        parser.add_argument("--json", action="store_true", help="print JSON")
    health = commands.add_parser("health", help="exit 0 if the server answers ApiVersions")
    health.add_argument("--timeout", type=float, default=5.0, help="seconds")
    add_server_arguments(listing, describe, delete, reset, health)


@reports_admin_errors
def run(args: argparse.Namespace) -> int:
    if args.command == "health":
        return _health(args)
    return _COMMANDS[args.groups_command](args)


def _address(value: str, default_port: int) -> tuple[str, int]:
    """``HOST[:PORT]`` given on the command line; an empty host is this machine."""
    try:
        host, port = parse_host_port(value, default_port)
    except ValueError as exc:
        raise AdminError(f"bad address {value!r}: {exc}") from exc
    return host or "127.0.0.1", port


def add_server_arguments(*parsers: argparse.ArgumentParser) -> None:
    """``--bootstrap`` and ``--command-config`` on each command that talks to a server: what
    :func:`client_for` reads."""
    for parser in parsers:
        parser.add_argument(
            "--bootstrap", metavar="HOST:PORT", default=DEFAULT_BOOTSTRAP, help="default: %(default)s"
        )
        add_command_config_argument(parser)


def client_for(args: argparse.Namespace, timeout_s: float = 10.0) -> AdminClient:
    """An admin client for ``--bootstrap``, secured as ``--command-config`` and the environment say."""
    host, port = _address(args.bootstrap, 9092)
    return AdminClient(host, port, timeout_s=timeout_s, security=client_security(args))


def _health(args: argparse.Namespace) -> int:
    with client_for(args, args.timeout) as client:
        client.api_versions()
    print("ok")
    return 0


def _list(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        groups = client.list_groups()
    if args.json:
        print(json.dumps([{"group": g, "protocol_type": p, "state": s} for g, p, s in groups], indent=1))
        return 0
    print_table(["GROUP", "PROTOCOL-TYPE", "STATE"], [list(row) for row in groups])
    return 0


def describe_rows(
    group: Any, committed: dict[tuple[str, int], int], log_end: dict[tuple[str, int], int]
) -> list[dict[str, Any]]:
    """One row per partition that is assigned or committed, as ``kafka-consumer-groups --describe``."""
    owners: dict[tuple[str, int], Any] = {}
    for member in group.members:
        assignment = decode_member_assignment(str(group.protocol_type), bytes(member.member_assignment))
        for topic, partitions in (assignment or {}).items():
            for partition in partitions:
                owners[(topic, partition)] = member
    return partition_rows(owners, committed, log_end)


def _delete(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        try:
            client.delete_group(args.group)
        except AdminError as exc:
            if "GROUP_ID_NOT_FOUND" in str(exc):
                raise AdminError(f"unknown group {args.group!r}") from exc
            if "NON_EMPTY_GROUP" in str(exc):
                raise AdminError(
                    f"group {args.group!r} still has members (NON_EMPTY_GROUP); stop its consumers first"
                ) from exc
            raise
    print(f"Deleted group {args.group}")
    return 0


def _reset_offsets(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        plan, not_executable = reset_offsets.run(args, client)
    rows = reset_offsets.plan_rows(args.group, plan)
    if not_executable is not None:
        print(f"kcoord: note: --execute would be refused now: {not_executable}", file=sys.stderr)
    if args.json:
        print(json.dumps({"executed": args.execute, "partitions": rows}, indent=1))
        return 0
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    print_table(headers, [[_shown(row[key]) for key in row] for row in rows])
    if args.execute:
        print(f"\nCommitted {len(rows)} offset(s) for group {args.group}.")
    else:
        print("\nDry run: nothing was changed; add --execute to commit these offsets.")
    return 0


def _describe(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        consumer_group = client.describe_consumer_group(args.group)
        if consumer_group is not None:
            offsets = client.group_offsets(args.group)
            missing = sorted(set(assigned_partitions(consumer_group)) - set(offsets.log_end))
            log_end = {**client.log_end_offsets(missing), **offsets.log_end}
            return _print_consumer_group(args, consumer_group, offsets.committed, log_end)
        share_group = client.describe_share_group(args.group)
        if share_group is not None:
            return print_share_group(args, share_group, client.share_group_offsets(args.group), print_table)
        group = client.describe_group(args.group)
        offsets = client.group_offsets(args.group)
        if str(group.group_state) == "Dead" and not group.members and not offsets.committed:
            raise AdminError(f"unknown group {args.group!r}")
        assigned = [
            (topic, partition)
            for member in group.members
            for topic, partitions in (
                decode_member_assignment(str(group.protocol_type), bytes(member.member_assignment)) or {}
            ).items()
            for partition in partitions
        ]
        log_end = {**client.log_end_offsets(sorted(set(assigned) - set(offsets.log_end))), **offsets.log_end}
    rows = describe_rows(group, offsets.committed, log_end)
    members = [
        {
            "member_id": str(m.member_id),
            "group_instance_id": m.group_instance_id,
            "client_id": str(m.client_id),
            "host": str(m.client_host),
            "assignment": decode_member_assignment(str(group.protocol_type), bytes(m.member_assignment)),
        }
        for m in group.members
    ]
    summary = {
        "group": args.group,
        "state": str(group.group_state),
        "protocol_type": str(group.protocol_type),
        "protocol": str(group.protocol_data),
        "members": members,
    }
    title = (
        f"Group {args.group}: {group.group_state}, protocol {group.protocol_type}/{group.protocol_data}, "
        f"{len(members)} member(s)"
    )
    return _print_description(args, summary, title, rows)


def _print_consumer_group(
    args: argparse.Namespace,
    group: Any,
    committed: dict[tuple[str, int], int],
    log_end: dict[tuple[str, int], int],
) -> int:
    rows = consumer_rows(group, committed, log_end)
    members = consumer_members(group)
    summary = {
        "group": args.group,
        "type": "consumer",
        "state": str(group.group_state),
        "group_epoch": int(group.group_epoch),
        "assignment_epoch": int(group.assignment_epoch),
        "assignor": str(group.assignor_name),
        "members": members,
    }
    title = (
        f"Group {args.group}: {group.group_state}, consumer protocol (KIP-848), group epoch "
        f"{group.group_epoch}, assignor {group.assignor_name}, {len(members)} member(s)"
    )
    _print_description(args, summary, title, rows)
    if not args.json:
        print()
        print_table(list(MEMBER_HEADERS), member_rows(members))
    return 0


def _print_description(
    args: argparse.Namespace, summary: dict[str, Any], title: str, rows: list[dict[str, Any]]
) -> int:
    """``summary`` with the partition rows as JSON, or ``title`` over the partition table."""
    if args.json:
        print(json.dumps({**summary, "partitions": rows}, indent=1))
        return 0
    print(f"{title}\n")
    print_table(PARTITION_HEADERS, [[_shown(row[key]) for key in row] for row in rows])
    return 0


def _history(args: argparse.Namespace) -> int:
    host, port = _address(args.metrics, 9644)
    security = client_security(args)
    url = url_for(f"{host}:{port}", f"/v1/groups/{quote(args.group, safe='')}", security)
    try:
        view = get_json(url, security)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise AdminError(f"unknown group {args.group!r}") from exc
        raise AdminError(f"{url}: HTTP {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise AdminError(f"{url}: {exc}") from exc
    history = view["history"]
    if args.json:
        print(json.dumps(history, indent=1))
        return 0
    if view.get("type") == "consumer":
        print(f"Group {view['group']}: {view['state']}, group epoch {view['group_epoch']} (KIP-848)\n")
        print_table(
            ["#", "EPOCH", "TRIGGER", "MEMBER", "RECONCILE-MS"],
            [
                [str(i), str(b["epoch"]), b["trigger"], _shown(b["member_id"]), _shown(b["reconcile_ms"])]
                for i, b in enumerate(history, 1)
            ],
        )
        _print_transactions(view)
        return 0
    print(
        f"Group {view['group']}: {view['state']}, generation {view['generation']}, "
        f"{len(history)} rebalance(s)\n"
    )
    headers = [
        "#",
        "TRIGGER",
        "OUTCOME",
        "GEN",
        "JOIN-MS",
        "SYNC-MS",
        "TOTAL-MS",
        "BEFORE",
        "AFTER",
        "REMOVED",
    ]
    rows = [
        [
            str(i),
            r["trigger"],
            r["outcome"],
            f"{r['generation_before']}->{_shown(r['generation_after'])}",
            _shown(r["join_ms"]),
            _shown(r["sync_ms"]),
            _shown(r["total_ms"]),
            str(len(r["members_before"])),
            str(len(r["members_after"])),
            ",".join(r["removed_not_rejoined"] + r["removed_not_synced"]) or "-",
        ]
        for i, r in enumerate(history, 1)
    ]
    print_table(headers, rows)
    for i, r in enumerate(history, 1):
        print(f"#{i} reason: {r['reason']}" + "".join(f"\n   client: {c}" for c in r["client_reasons"]))
    _print_transactions(view)
    return 0


def _print_transactions(view: dict[str, Any]) -> None:
    """The group's transactional commits: the open transactions holding its offsets, then the last ended."""
    open_now, ended = view.get("open_transactions", []), view.get("transactions", [])
    if not open_now and not ended:
        return
    print("\nTransactions holding or committing the group's offsets:")
    rows = [
        [
            str(t["producer_id"]),
            str(t["producer_epoch"]),
            "open",
            ", ".join(f"{o['topic']}-{o['partition']}@{o['offset']}" for o in t["offsets"]),
        ]
        for t in open_now
    ]
    rows += [
        [str(t["producer_id"]), str(t["producer_epoch"]), t["result"], f"{t['partitions']} partition(s)"]
        for t in ended
    ]
    print_table(["PRODUCER", "EPOCH", "STATE", "OFFSETS"], rows)


def _shown(value: Any) -> str:
    return "-" if value is None else str(value)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    for row in [list(headers), *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": _list,
    "describe": _describe,
    "history": _history,
    "delete": _delete,
    "reset-offsets": _reset_offsets,
}
"""Each ``kcoord groups`` subcommand's body."""
