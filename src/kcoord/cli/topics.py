"""``kcoord topics create|list|describe|delete|alter-partitions``, ``kcoord produce`` and ``kcoord consume``.

All speak the Kafka protocol to ``--bootstrap`` through kcoord's own admin client (see
:mod:`kcoord.cli.console_client`); errors print ``kcoord: ...`` and exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kcoord.cli import console_client, console_io
from kcoord.cli.admin_client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, AdminClient, AdminError
from kcoord.cli.groups import add_server_arguments, client_for, print_table, reports_admin_errors

INTERNAL_PREFIX = "__"


def add_commands(commands: Any) -> None:
    """Add ``topics``, ``produce`` and ``consume`` to the top-level subparsers."""
    topics = commands.add_parser("topics", help="create, list, describe, delete and grow topics")
    topic_commands = topics.add_subparsers(dest="topics_command", required=True)
    create = topic_commands.add_parser("create", help="create a topic")
    create.add_argument("topic")
    create.add_argument(
        "--partitions", type=int, default=-1, metavar="N", help="default: the server's num.partitions"
    )
    create.add_argument(
        "--config", action="append", default=[], metavar="NAME=VALUE", help="a topic config (repeatable)"
    )
    listing = topic_commands.add_parser("list", help="every topic with its partition count")
    listing.add_argument("--internal", action="store_true", help="include __consumer_offsets")
    describe = topic_commands.add_parser("describe", help="partitions, offsets and configs of a topic")
    describe.add_argument("topic")
    delete = topic_commands.add_parser("delete", help="delete a topic and its records")
    delete.add_argument("topic")
    alter = topic_commands.add_parser("alter-partitions", help="grow a topic to N partitions")
    alter.add_argument("topic")
    alter.add_argument("--partitions", type=int, required=True, metavar="N", help="the new total")
    for parser in (listing, describe):
        parser.add_argument("--json", action="store_true", help="print JSON")

    produce = _console_command(commands, "produce", "send lines from stdin as records")
    console_io.add_produce_arguments(produce)
    consume = _console_command(commands, "consume", "print a topic's records, alone or in a group")
    console_io.add_consume_arguments(consume)
    add_server_arguments(create, listing, describe, delete, alter, produce, consume)


def _console_command(commands: Any, name: str, help_text: str) -> Any:
    """``produce`` or ``consume``: a top-level command whose help is the console module's docstring."""
    return commands.add_parser(
        name,
        help=help_text,
        description=(console_io.__doc__ or "").replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


@reports_admin_errors
def run(args: argparse.Namespace) -> int:
    with client_for(args, timeout_s=60.0) as client:
        if args.command == "produce":
            console_io.produce(args, client, sys.stdin)
            return 0
        if args.command == "consume":
            console_io.consume(args, client, sys.stdout)
            return 0
        return _TOPIC_COMMANDS[args.topics_command](args, client)


def _create(args: argparse.Namespace, client: AdminClient) -> int:
    configs = {}
    for item in args.config:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise AdminError(f"--config {item!r}: expected NAME=VALUE")
        configs[name] = value
    made = console_client.create_topic(client, args.topic, args.partitions, configs)
    print(f"Created topic {args.topic} with {made} partition(s)")
    return 0


def _list(args: argparse.Namespace, client: AdminClient) -> int:
    counts = client.partition_counts(None)
    shown = sorted((t, n) for t, n in counts.items() if args.internal or not t.startswith(INTERNAL_PREFIX))
    if args.json:
        print(json.dumps([{"topic": t, "partitions": n} for t, n in shown], indent=1))
        return 0
    print_table(["TOPIC", "PARTITIONS"], [[t, str(n)] for t, n in shown])
    return 0


def _describe(args: argparse.Namespace, client: AdminClient) -> int:
    count = client.partition_counts([args.topic])[args.topic]
    partitions = [(args.topic, p) for p in range(count)]
    start = client.list_offsets(partitions, EARLIEST_TIMESTAMP)
    end = client.list_offsets(partitions, LATEST_TIMESTAMP)
    configs = console_client.topic_configs(client, args.topic)
    rows = [
        {"partition": p, "log_start_offset": start.get(key), "log_end_offset": end.get(key)}
        for key in partitions
        for p in [key[1]]
    ]
    if args.json:
        print(json.dumps({"topic": args.topic, "partitions": rows, "configs": configs}, indent=1))
        return 0
    print(f"Topic {args.topic}: {count} partition(s)")
    for name, value in sorted(configs.items()):
        print(f"  {name}={value}")
    print()
    print_table(
        ["PARTITION", "LOG-START-OFFSET", "LOG-END-OFFSET"],
        [[str(r["partition"]), str(r["log_start_offset"]), str(r["log_end_offset"])] for r in rows],
    )
    return 0


def _delete(args: argparse.Namespace, client: AdminClient) -> int:
    console_client.delete_topic(client, args.topic)
    print(f"Deleted topic {args.topic}")
    return 0


def _alter(args: argparse.Namespace, client: AdminClient) -> int:
    console_client.alter_partitions(client, args.topic, args.partitions)
    print(f"Topic {args.topic} now has {args.partitions} partition(s)")
    return 0


_TOPIC_COMMANDS = {
    "create": _create,
    "list": _list,
    "describe": _describe,
    "delete": _delete,
    "alter-partitions": _alter,
}
