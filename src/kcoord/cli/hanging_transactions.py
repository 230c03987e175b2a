"""``kcoord transactions describe-producers|find-hanging|abort``: find and end hanging transactions,
as Kafka's ``kafka-transactions.sh`` does.

A transaction *hangs* when a partition holds its open records but no coordinator will ever write its
marker (the coordinator lost its state, or the producer wrote after the coordinator ended it): the
partition's last stable offset stays at its first offset, so read_committed consumers stop there.

- ``describe-producers --topic T --partition P [--broker-id N]``: the partition's active producers
  (DescribeProducers on its leader, or on broker N).
- ``find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]``:
  the open transactions (DescribeProducers) whose producer last wrote more than MIN minutes ago
  (default 15, Kafka's ``transaction.max.timeout.ms``), and whose producer id no coordinator lists
  (ListTransactions) or whose transactional id's coordinator no longer counts the partition in its
  transaction (DescribeTransactions). With ``--broker-id`` every non-internal partition with a
  replica on that broker is searched, asking that broker.
- ``abort --topic T --partition P (--start-offset O | --producer-id X --producer-epoch E
  --coordinator-epoch C)``: writes an abort marker for the producer on the partition (WriteTxnMarkers
  to its leader; needs Cluster CLUSTER_ACTION). With ``--start-offset`` the producer is the one whose
  open transaction starts at O (DescribeProducers), and the coordinator epoch is that of its last
  marker there (0 when none, as Kafka's tool: no coordinator epoch is older). The last stable offset
  then moves past the transaction.

Every failure (an unknown topic or partition, no open transaction at that offset, a refusal) ends
with ``kcoord: <reason>`` on stderr and exit status 1; bad arguments exit 2.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from kcoord.cli.admin_client import AdminClient, AdminError
from kcoord.cli.groups import client_for, print_table
from kcoord.cli.transaction_admin import (
    AbortSpec,
    PartitionInfo,
    ProducerState,
    abort_transaction,
    describe_producers,
    ongoing_partitions,
    partition_info,
    partitions_of,
    transactional_ids_of,
)

__all__ = ["add_parsers", "run"]

DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
PRODUCER_HEADERS = [
    "PRODUCER-ID",
    "PRODUCER-EPOCH",
    "COORDINATOR-EPOCH",
    "LAST-SEQUENCE",
    "LAST-TIMESTAMP",
    "START-OFFSET",
]
HANGING_HEADERS = [
    "TOPIC",
    "PARTITION",
    "PRODUCER-ID",
    "PRODUCER-EPOCH",
    "COORDINATOR-EPOCH",
    "START-OFFSET",
    "LAST-TIMESTAMP",
    "DURATION-MIN",
]


def add_parsers(transaction_commands: Any) -> list[argparse.ArgumentParser]:
    """Add the three commands; returns their parsers (the caller adds --bootstrap and --command-config)."""
    producers = transaction_commands.add_parser(
        "describe-producers", help="the active producers of a partition and their open transactions"
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    producers.add_argument("--broker-id", type=int, help="ask this broker instead of the leader")
    producers.add_argument("--json", action="store_true", help="print JSON")

    hanging = transaction_commands.add_parser(
        "find-hanging", help="open transactions no coordinator will end"
    )
    hanging.add_argument("--broker-id", type=int, help="search the partitions with a replica on this broker")
    hanging.add_argument("--topic", help="search this topic's partitions")
    hanging.add_argument("--partition", type=int, help="only this partition (with --topic)")
    hanging.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
        metavar="MINUTES",
        help="only transactions whose producer last wrote longer ago (default: %(default)s)",
    )
    hanging.add_argument("--json", action="store_true", help="print JSON")

    abort = transaction_commands.add_parser(
        "abort", help="abort a hanging transaction (needs CLUSTER_ACTION on the cluster)"
    )
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="first offset of the transaction to abort")
    abort.add_argument("--producer-id", type=int, help="instead of --start-offset, with the two below")
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    return [producers, hanging, abort]


def run(args: argparse.Namespace) -> int:
    command = args.transactions_command
    if command == "describe-producers":
        return _describe_producers(args)
    if command == "find-hanging":
        return _find_hanging(args)
    return _abort(args)


def _describe_producers(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        info = partition_info(client, args.topic, args.partition)
        states = describe_producers(client, [info], args.broker_id)
    if args.json:
        print(json.dumps([_producer_json(s) for s in states], indent=1))
        return 0
    rows = [
        [
            str(s.producer_id),
            str(s.producer_epoch),
            str(s.coordinator_epoch),
            str(s.last_sequence),
            str(s.last_timestamp),
            "-" if s.transaction_start_offset < 0 else str(s.transaction_start_offset),
        ]
        for s in states
    ]
    print_table(PRODUCER_HEADERS, rows)
    return 0


def _producer_json(state: ProducerState) -> dict[str, Any]:
    return {
        "topic": state.topic,
        "partition": state.partition,
        "producer_id": state.producer_id,
        "producer_epoch": state.producer_epoch,
        "coordinator_epoch": state.coordinator_epoch,
        "last_sequence": state.last_sequence,
        "last_timestamp": state.last_timestamp,
        "start_offset": state.transaction_start_offset,
    }


def _find_hanging(args: argparse.Namespace) -> int:
    if args.topic is None and args.broker_id is None:
        raise AdminError("find-hanging needs --topic or --broker-id to limit the search")
    if args.partition is not None and args.topic is None:
        raise AdminError("--partition needs --topic")
    if args.max_transaction_timeout < 0:
        raise AdminError("--max-transaction-timeout must be 0 or more minutes")
    with client_for(args) as client:
        hanging = find_hanging(
            client, args.topic, args.partition, args.broker_id, args.max_transaction_timeout * 60_000
        )
    now_ms = int(time.time() * 1000)
    if args.json:
        print(json.dumps([_producer_json(s) for s in hanging], indent=1))
        return 0
    rows = [
        [
            s.topic,
            str(s.partition),
            str(s.producer_id),
            str(s.producer_epoch),
            str(s.coordinator_epoch),
            str(s.transaction_start_offset),
            str(s.last_timestamp),
            str((now_ms - s.last_timestamp) // 60_000),
        ]
        for s in hanging
    ]
    print_table(HANGING_HEADERS, rows)
    return 0


def find_hanging(
    client: AdminClient,
    topic: str | None,
    partition: int | None,
    broker_id: int | None,
    max_transaction_timeout_ms: int,
) -> list[ProducerState]:
    """Kafka's ``FindHangingTransactionsCommand``: candidates older than the timeout, minus those a
    coordinator still holds the partition of."""
    partitions = _partitions_to_search(client, topic, partition, broker_id)
    now_ms = int(time.time() * 1000)
    candidates = [
        state
        for state in describe_producers(client, partitions, broker_id)
        if state.transaction_start_offset >= 0 and now_ms - state.last_timestamp > max_transaction_timeout_ms
    ]
    transactional_ids = transactional_ids_of(client, {c.producer_id for c in candidates})
    expected: dict[str, set[tuple[str, int]] | None] = {
        tid: ongoing_partitions(client, tid) for tid in sorted(set(transactional_ids.values()))
    }
    return hanging_among(candidates, transactional_ids, expected)


def hanging_among(
    candidates: list[ProducerState],
    transactional_ids: dict[int, str],
    expected: dict[str, set[tuple[str, int]] | None],
) -> list[ProducerState]:
    """The candidates no coordinator will end: their producer id is no transactional id's, or the
    id's coordinator does not know it (``expected`` None), or no longer counts their partition in
    the id's transaction (ongoing or completing: DescribeTransactions lists the partitions it will
    still write a marker to)."""
    hanging = []
    for state in candidates:
        tid = transactional_ids.get(state.producer_id)
        still_expected = None if tid is None else expected.get(tid)
        if still_expected is None or (state.topic, state.partition) not in still_expected:
            hanging.append(state)
    return hanging


def _partitions_to_search(
    client: AdminClient, topic: str | None, partition: int | None, broker_id: int | None
) -> list[PartitionInfo]:
    if topic is not None and partition is not None:
        return [partition_info(client, topic, partition)]
    found = partitions_of(client, None if topic is None else [topic])
    if broker_id is None:
        return found
    return [info for info in found if broker_id in info.replicas or broker_id == info.leader]


def _abort(args: argparse.Namespace) -> int:
    if args.start_offset is None and args.producer_id is None:
        raise AdminError(
            "name the transaction to abort with --start-offset, or with --producer-id, "
            "--producer-epoch and --coordinator-epoch"
        )
    if args.start_offset is not None and args.producer_id is not None:
        raise AdminError("--start-offset and --producer-id name the transaction two ways: give one")
    with client_for(args) as client:
        info = partition_info(client, args.topic, args.partition)
        spec = (
            _spec_from_arguments(args)
            if args.start_offset is None
            else _spec_at(client, info, args.start_offset)
        )
        abort_transaction(client, spec)
    print(f"aborted the transaction of {spec}")
    return 0


def _spec_from_arguments(args: argparse.Namespace) -> AbortSpec:
    if args.producer_epoch is None:
        raise AdminError("--producer-id needs --producer-epoch")
    if args.coordinator_epoch is None:
        raise AdminError("--producer-id needs --coordinator-epoch")
    # A producer whose first transaction on the partition hangs has no coordinator epoch there
    # (-1): 0 is no older than any, as Kafka's tool reasons.
    return AbortSpec(
        args.topic, args.partition, args.producer_id, args.producer_epoch, max(0, args.coordinator_epoch)
    )


def _spec_at(client: AdminClient, info: PartitionInfo, start_offset: int) -> AbortSpec:
    states = describe_producers(client, [info])
    for state in states:
        if state.transaction_start_offset == start_offset:
            return AbortSpec(
                info.topic,
                info.partition,
                state.producer_id,
                state.producer_epoch,
                max(0, state.coordinator_epoch),
            )
    open_at = sorted(s.transaction_start_offset for s in states if s.transaction_start_offset >= 0)
    shown = ", ".join(map(str, open_at)) if open_at else "none"
    raise AdminError(
        f"no open transaction starts at offset {start_offset} on {info.topic}-{info.partition}"
        f" (open transactions start at: {shown})"
    )
