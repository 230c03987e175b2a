"""``kcoord transactions list|describe`` (and, from :mod:`kcoord.cli.hanging_transactions`,
``describe-producers|find-hanging|abort``), as Kafka's ``kafka-transactions.sh``.

All speak the Kafka protocol to ``--bootstrap`` (so they work against any Kafka broker too):
``list`` asks ListTransactions of every broker Metadata names (each lists the ids it coordinates;
v1: ``--state`` filters by state name, ``--min-duration-ms`` by
how long a transaction has been running); ``describe`` finds the id's transaction coordinator
(FindCoordinator key type 1) and asks DescribeTransactions. ``--json`` prints what the table shows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from kio.serial.errors import SerialError

from kcoord.cli import hanging_transactions
from kcoord.cli.admin_client import AdminError
from kcoord.cli.groups import add_server_arguments, client_for, print_table, reports_admin_errors
from kcoord.cli.transaction_admin import brokers
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import error_name

LIST_TRANSACTIONS_V = 1
DESCRIBE_TRANSACTIONS_V = 0


def add_commands(commands: Any) -> None:
    """Add ``transactions`` to the top-level subparsers."""
    transactions = commands.add_parser(
        "transactions", help="inspect transactional ids and their transactions"
    )
    transaction_commands = transactions.add_subparsers(dest="transactions_command", required=True)
    listing = transaction_commands.add_parser(
        "list", help="every transactional id with its producer and state"
    )
    listing.add_argument("--state", action="append", default=[], help="only ids in this state (repeatable)")
    listing.add_argument(
        "--min-duration-ms", type=int, default=-1, help="only transactions running longer than this"
    )
    describe = transaction_commands.add_parser("describe", help="one id's transaction and its partitions")
    describe.add_argument("transactional_id")
    for parser in (listing, describe):
        parser.add_argument("--json", action="store_true", help="print JSON")
    add_server_arguments(listing, describe, *hanging_transactions.add_parsers(transaction_commands))


@reports_admin_errors
def run(args: argparse.Namespace) -> int:
    return _COMMANDS.get(args.transactions_command, hanging_transactions.run)(args)


def _list(args: argparse.Namespace) -> int:
    """ListTransactions on every broker, as Kafka's tool: each lists the ids it coordinates."""
    body = {"state_filters": args.state, "producer_id_filters": [], "duration_filter": args.min_duration_ms}
    rows: list[tuple[str, int, int, str]] = []
    unknown: set[str] = set()
    with client_for(args) as client:
        for node, address in sorted(brokers(client).items()):
            response = client.broker_call(address, ApiKey.LIST_TRANSACTIONS, LIST_TRANSACTIONS_V, body)
            if int(response.error_code) != 0:
                raise AdminError(f"ListTransactions on broker {node}: {error_name(int(response.error_code))}")
            unknown.update(str(name) for name in response.unknown_state_filters)
            rows.extend(
                (str(t.transactional_id), node, int(t.producer_id), str(t.transaction_state))
                for t in response.transaction_states
            )
    if unknown:
        print(f"kcoord: note: no such state: {', '.join(sorted(unknown))}", file=sys.stderr)
    rows.sort()
    if args.json:
        listed = [
            {"transactional_id": t, "coordinator": c, "producer_id": p, "state": s} for t, c, p, s in rows
        ]
        print(json.dumps(listed, indent=1))
        return 0
    print_table(
        ["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"],
        [[t, str(c), str(p), s] for t, c, p, s in rows],
    )
    return 0


def _describe(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        try:
            response = client.transaction_coordinator_call(
                args.transactional_id,
                ApiKey.DESCRIBE_TRANSACTIONS,
                DESCRIBE_TRANSACTIONS_V,
                {"transactional_ids": [args.transactional_id]},
            )
        except SerialError as exc:  # kio reads no negative timestamp: Kafka's -1 start of an Empty id
            raise AdminError(
                f"DescribeTransactions {args.transactional_id}: no transaction has started yet"
                " (the start time is -1, which this client cannot read)"
            ) from exc
    (state,) = response.transaction_states
    if int(state.error_code) != 0:
        raise AdminError(f"DescribeTransactions {args.transactional_id}: {error_name(int(state.error_code))}")
    start_ms = int(state.transaction_start_time.timestamp() * 1000)
    duration_ms = max(0, int(time.time() * 1000) - start_ms) if start_ms > 0 else None
    partitions = [f"{t.topic}-{p}" for t in state.topics for p in t.partitions]
    timeout_ms = int(state.transaction_timeout.total_seconds() * 1000)
    if args.json:
        described = {
            "transactional_id": str(state.transactional_id),
            "producer_id": int(state.producer_id),
            "producer_epoch": int(state.producer_epoch),
            "state": str(state.transaction_state),
            "timeout_ms": timeout_ms,
            "start_ms": start_ms,
            "duration_ms": duration_ms,
            "partitions": partitions,
        }
        print(json.dumps(described, indent=1))
        return 0
    headers = ["TRANSACTIONAL-ID", "PRODUCER-ID", "EPOCH", "STATE", "TIMEOUT-MS", "DURATION-MS", "PARTITIONS"]
    row = [
        str(state.transactional_id),
        str(state.producer_id),
        str(state.producer_epoch),
        str(state.transaction_state),
        str(timeout_ms),
        "-" if duration_ms is None else str(duration_ms),
        ",".join(partitions) or "-",
    ]
    print_table(headers, [row])
    return 0


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"list": _list, "describe": _describe}
"""The ``kcoord transactions`` subcommands answered here; the others find hanging transactions."""
