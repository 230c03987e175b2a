"""``kcoord produce TOPIC`` (lines from stdin) and ``kcoord consume TOPIC`` (records to stdout).

Formats (``--format``):

- ``text`` (default): a line is a record's value; with ``--key-separator SEP`` the text before the
  first SEP is the key (produce), or the key is printed before SEP and the value (consume).
  ``--header NAME=VALUE`` adds a header to every produced record; consume prints no headers.
- ``json``: one object per line, ``{"key", "value", "headers": {name: value}, "partition"}`` for
  produce (only ``value`` is needed); consume prints those plus ``topic``, ``offset`` and
  ``timestamp``. Keys and values are UTF-8 text (bytes that are not are replaced).

Produce picks the partition from ``--partition``, the JSON ``partition``, the key (murmur2, as
Kafka's producers) or round-robin per batch. Piped input is sent in batches, typed input a line
at a time. Consume without ``--group`` reads every partition from the end (``--from-beginning``:
from the start); with ``--group`` it joins the group, starts where the group committed and
commits as it prints. It stops at ``--max-messages``, after ``--idle-timeout-ms`` without a
record, or on Ctrl-C / SIGTERM (leaving the group cleanly).
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from kcoord.cli import console_client
from kcoord.cli.admin_client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, AdminClient, AdminError
from kcoord.cli.group_member import GroupMember, RejoinRequiredError
from kcoord.cli.records import ConsoleRecord, encode_batch, partition_for_key

PIPED_BATCH = 500
POLL_WAIT_MS = 500

Partition = tuple[str, int]


def add_format_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="default: %(default)s")
    parser.add_argument("--key-separator", metavar="SEP", help="text format: key SEP value")


def add_produce_arguments(parser: argparse.ArgumentParser) -> None:
    add_format_arguments(parser)
    parser.add_argument("--partition", type=int, metavar="P", help="every record to partition P")
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME=VALUE", help="on every record (repeatable)"
    )


def add_consume_arguments(parser: argparse.ArgumentParser) -> None:
    add_format_arguments(parser)
    parser.add_argument("--group", metavar="GROUP", help="consume as a member of GROUP, committing offsets")
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    parser.add_argument("--max-messages", type=int, metavar="N", help="stop after N records")
    parser.add_argument(
        "--idle-timeout-ms", type=int, metavar="MS", help="stop after MS without a record (default: never)"
    )


# --- produce ---------------------------------------------------------------------------------


def produce(args: argparse.Namespace, client: AdminClient, lines: TextIO) -> int:
    """Send every line of ``lines``; prints a summary on stderr and returns the record count."""
    partitions = client.partition_counts([args.topic])[args.topic]
    if args.partition is not None and not 0 <= args.partition < partitions:
        raise AdminError(f"topic {args.topic!r} has no partition {args.partition} (it has {partitions})")
    headers = tuple(_header(item) for item in args.header)
    round_robin = itertools.cycle(range(partitions))
    sent = 0
    batch_size = 1 if lines.isatty() else PIPED_BATCH
    for chunk in _chunks(enumerate(lines, 1), batch_size):
        by_partition: dict[int, list[ConsoleRecord]] = {}
        fallback = next(round_robin)
        for number, line in chunk:
            record, chosen = _parse_line(args, line.rstrip("\r\n"), number, headers)
            if chosen is None:
                chosen = args.partition
            if chosen is None:
                chosen = fallback if record.key is None else partition_for_key(record.key, partitions)
            if not 0 <= chosen < partitions:
                raise AdminError(f"line {number}: topic {args.topic!r} has no partition {chosen}")
            by_partition.setdefault(chosen, []).append(record)
        for partition, records in sorted(by_partition.items()):
            console_client.produce(client, args.topic, partition, encode_batch(records))
            sent += len(records)
    print(f"produced {sent} record(s) to {args.topic}", file=sys.stderr)
    return sent


def _chunks(items: Iterable[tuple[int, str]], size: int) -> Iterator[list[tuple[int, str]]]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _header(item: str) -> tuple[str, bytes]:
    name, sep, value = item.partition("=")
    if not sep or not name:
        raise AdminError(f"--header {item!r}: expected NAME=VALUE")
    return name, value.encode()


def _parse_line(
    args: argparse.Namespace, line: str, number: int, headers: tuple[tuple[str, bytes], ...]
) -> tuple[ConsoleRecord, int | None]:
    now = int(time.time() * 1000)
    if args.format == "json":
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise AdminError(f"line {number}: not JSON: {exc}") from None
        if not isinstance(doc, dict) or "value" not in doc:
            raise AdminError(f'line {number}: expected an object with "value"')
        doc_headers = doc.get("headers") or {}
        if not isinstance(doc_headers, dict):
            raise AdminError(f'line {number}: "headers" must be an object')
        partition = doc.get("partition")
        if partition is not None and not isinstance(partition, int):
            raise AdminError(f'line {number}: "partition" must be an integer')
        record = ConsoleRecord(
            _utf8(doc.get("value")),
            _utf8(doc.get("key")),
            headers + tuple((str(k), _utf8(v)) for k, v in doc_headers.items()),
            now,
        )
        return record, partition
    key: bytes | None = None
    if args.key_separator:
        key_text, sep, line = line.partition(args.key_separator)
        if not sep:
            raise AdminError(f"line {number}: no key separator {args.key_separator!r}")
        key = key_text.encode()
    return ConsoleRecord(line.encode(), key, headers, now), None


def _utf8(value: Any) -> bytes | None:
    return None if value is None else str(value).encode()


# --- consume ---------------------------------------------------------------------------------


def consume(args: argparse.Namespace, client: AdminClient, out: TextIO) -> int:
    """Print records until a stop condition; returns how many were printed."""
    client.partition_counts([args.topic])
    stop = _StopFlag()
    member = GroupMember(client, args.group, args.topic) if args.group else None
    printed = 0
    try:
        while not stop.set:
            positions = _start_positions(args, client, member)
            try:
                printed = _poll_loop(args, client, member, positions, out, printed, stop)
            except RejoinRequiredError:
                continue
            break
    finally:
        stop.restore()
        if member is not None:
            member.leave()
    return printed


def _start_positions(
    args: argparse.Namespace, client: AdminClient, member: GroupMember | None
) -> dict[Partition, int]:
    if member is None:
        partitions = [(args.topic, p) for p in range(client.partition_counts([args.topic])[args.topic])]
        committed: dict[Partition, int] = {}
    else:
        partitions = member.join()
        committed = {k: v for k, v in client.group_offsets(args.group).committed.items() if k in partitions}
    reset = client.list_offsets(
        [p for p in partitions if p not in committed],
        EARLIEST_TIMESTAMP if args.from_beginning else LATEST_TIMESTAMP,
    )
    return {p: committed.get(p, reset.get(p, 0)) for p in partitions}


def _poll_loop(
    args: argparse.Namespace,
    client: AdminClient,
    member: GroupMember | None,
    positions: dict[Partition, int],
    out: TextIO,
    printed: int,
    stop: _StopFlag,
) -> int:
    idle_since = time.monotonic()
    while not stop.set:
        if args.max_messages is not None and printed >= args.max_messages:
            break
        if (
            args.idle_timeout_ms is not None
            and (time.monotonic() - idle_since) * 1000 >= args.idle_timeout_ms
        ):
            break
        if member is not None:
            member.heartbeat_due()
        if not positions:
            time.sleep(POLL_WAIT_MS / 1000)
            continue
        fetched = console_client.fetch(client, positions, POLL_WAIT_MS)
        done: dict[Partition, int] = {}
        for key, result in sorted(fetched.items()):
            for record in result.records:
                if args.max_messages is not None and printed >= args.max_messages:
                    break
                out.write(_format(args, record) + "\n")
                printed += 1
                done[key] = record.offset + 1
        if done:
            out.flush()
            positions.update(done)
            idle_since = time.monotonic()
            if member is not None:
                member.commit(done)
    return printed


def _format(args: argparse.Namespace, record: ConsoleRecord) -> str:
    if args.format == "json":
        return json.dumps(
            {
                "topic": args.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": record.timestamp_ms,
                "key": _text(record.key),
                "value": _text(record.value),
                "headers": {name: _text(value) for name, value in record.headers},
            }
        )
    value = _text(record.value) or ""
    if args.key_separator:
        return f"{_text(record.key) or ''}{args.key_separator}{value}"
    return value


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


class _StopFlag:
    """SIGINT and SIGTERM end the poll loop between fetches, so the member can leave the group."""

    def __init__(self) -> None:
        self.set = False
        self._previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.set = True

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
