"""One process of the heartbeat load generator: many connections, each the only member of its group.

Run by ``heartbeat_load`` as ``python load_worker.py --bootstrap H:P --first N --connections K ...``.
Each connection joins its own group ``bench-hb-<index>`` (JoinGroup v5: MEMBER_ID_REQUIRED, then
again with the member id), syncs as leader (SyncGroup v3), and prints ``{"event": "ready"}``.
Then every stdin line is a phase, ``{"phase": P, "warmup_s": w, "duration_s": d}`` with P one of
heartbeat, commit, fetch, metadata (v12, the commits' topic) and api_versions (or
``{"phase": "quit"}``): every connection keeps ``--depth`` requests in flight, re-sending as each
answer arrives (a closed loop, driven from ``data_received``: no task per request). Answers during
the window after the warm-up are counted and their latencies kept; the worker prints one JSON line
with the count, window, errors, CPU seconds used and latencies.

An answer is checked by bytes: every answer of a phase on a connection must equal the first one
(decoded and checked for error code NONE), except for the correlation id, which must match the
request's (answers arrive in order).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import ssl
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

import uvloop

import wire
from kcoord.coordinator.classic.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    encode_assignment,
    encode_subscription,
)
from sasl_login import scram_sha_512_login

SESSION_MS = 120_000
REBALANCE_MS = 60_000


class LoadConnection(asyncio.Protocol):
    """A connection that is either answering setup calls (futures) or running a closed-loop phase."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._setup: deque[asyncio.Future[bytes]] = deque()
        self._in_flight: deque[tuple[int, float]] = deque()
        self._correlation = 0
        self._frame = b""
        self._expected: bytes | None = None
        self._check_first: Callable[[bytes], None] | None = None
        self.phase: Phase | None = None
        self.member_id = ""
        self.generation = -1
        self.closed = asyncio.get_running_loop().create_future()

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        for waiter in self._setup:
            if not waiter.done():
                waiter.set_exception(ConnectionError("server closed the connection"))

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= 4:
            size = int.from_bytes(buffer[:4], "big")
            if len(buffer) < 4 + size:
                break
            frame = bytes(buffer[4 : 4 + size])
            del buffer[: 4 + size]
            if self.phase is None:
                waiter = self._setup.popleft()
                if not waiter.done():  # a caller that gave up (cancelled) leaves its answer unread
                    waiter.set_result(frame)
            else:
                self._on_answer(frame)

    # -- setup calls

    async def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        assert self.transport is not None
        self._correlation += 1
        waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._setup.append(waiter)
        self.transport.write(wire.encode_request(api_key, version, body, self._correlation))
        frame = await waiter
        if wire.correlation_of(frame) != self._correlation:
            raise RuntimeError("answer out of order")
        return wire.decode_response(api_key, version, frame)

    # -- closed-loop phases

    def start_phase(self, phase: Phase, frame: bytes, check_first: Callable[[bytes], None]) -> None:
        self.phase = phase
        self._frame = frame
        self._expected = None
        self._check_first = check_first
        for _ in range(phase.depth):
            self._send()

    def _send(self) -> None:
        assert self.transport is not None
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        self._in_flight.append((self._correlation, time.perf_counter()))
        self.transport.write(wire.with_correlation(self._frame, self._correlation))

    def _on_answer(self, frame: bytes) -> None:
        phase = self.phase
        assert phase is not None
        correlation, sent_at = self._in_flight.popleft()
        now = time.perf_counter()
        body = frame[4:]
        if self._expected is None:
            assert self._check_first is not None
            try:
                self._check_first(frame)
                self._expected = body
            except AssertionError as error:
                phase.error(str(error))
        elif body != self._expected or wire.correlation_of(frame) != correlation:
            phase.error("answer differs from the phase's first answer")
        if phase.recording:
            phase.latencies_us.append(int((now - sent_at) * 1e6))
        if phase.sending:
            self._send()
        elif not self._in_flight:
            self.phase = None
            phase.drained_one()


class Phase:
    """Shared state of one phase across this worker's connections."""

    def __init__(self, depth: int, connections: int) -> None:
        self.depth = depth
        self.sending = True
        self.recording = False
        self.latencies_us: list[int] = []
        self.errors = 0
        self.first_error = ""
        self._undrained = connections
        self.drained = asyncio.get_running_loop().create_future()

    def error(self, message: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or message

    def drained_one(self) -> None:
        self._undrained -= 1
        if self._undrained == 0 and not self.drained.done():
            self.drained.set_result(None)


def _check(api_key: int, version: int) -> Callable[[bytes], None]:
    def check(frame: bytes) -> None:
        response = wire.decode_response(api_key, version, frame)
        codes = [int(response.error_code)] if hasattr(response, "error_code") else []
        groups = getattr(response, "groups", ())
        codes += [int(g.error_code) for g in groups]
        for topic in [t for g in groups for t in g.topics] + list(getattr(response, "topics", ())):
            codes += [int(p.error_code) for p in topic.partitions]
        assert codes and all(code == 0 for code in codes), f"api {api_key}: error codes {codes}"

    return check


def phase_frame(kind: str, connection: LoadConnection, group_id: str, topic: str) -> tuple[bytes, Any]:
    if kind == "heartbeat":
        body: dict[str, Any] = {
            "group_id": group_id,
            "generation_id": connection.generation,
            "member_id": connection.member_id,
            "group_instance_id": None,
        }
        return wire.encode_request(wire.HEARTBEAT, 4, body), _check(wire.HEARTBEAT, 4)
    if kind == "commit":
        partition = {"partition_index": 0, "committed_offset": 42, "committed_metadata": ""}
        body = {
            "group_id": group_id,
            "generation_id_or_member_epoch": connection.generation,
            "member_id": connection.member_id,
            "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [partition]}],
        }
        return wire.encode_request(wire.OFFSET_COMMIT, 8, body), _check(wire.OFFSET_COMMIT, 8)
    if kind == "fetch":
        group = {"group_id": group_id, "topics": [{"name": topic, "partition_indexes": [0]}]}
        body = {"groups": [group], "require_stable": False}
        return wire.encode_request(wire.OFFSET_FETCH, 8, body), _check(wire.OFFSET_FETCH, 8)
    if kind == "metadata":
        body = {
            "topics": [{"topic_id": None, "name": topic}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        return wire.encode_request(wire.METADATA, 12, body), _check(wire.METADATA, 12)
    if kind == "api_versions":
        body = {"client_software_name": "kcoord-bench", "client_software_version": "0.1"}
        return wire.encode_request(wire.API_VERSIONS, 3, body), _check(wire.API_VERSIONS, 3)
    raise ValueError(f"unknown phase {kind!r}")


async def join_own_group(
    connection: LoadConnection,
    group_id: str,
    topic: str,
    rebalance_ms: int = REBALANCE_MS,
    session_ms: int = SESSION_MS,
) -> None:
    """JoinGroup v5 twice (MEMBER_ID_REQUIRED, then with the id) and SyncGroup v3 as leader."""
    body: dict[str, Any] = {
        "group_id": group_id,
        "session_timeout": session_ms,
        "rebalance_timeout": rebalance_ms,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": encode_subscription(ConsumerSubscription(1, (topic,)))}],
    }
    first = await connection.call(wire.JOIN_GROUP, 5, body)
    joined = first  # a broker that does not ask for MEMBER_ID_REQUIRED first (Tansu) joins at once
    if int(first.error_code) == 79:  # MEMBER_ID_REQUIRED
        joined = await connection.call(wire.JOIN_GROUP, 5, {**body, "member_id": first.member_id})
    if int(joined.error_code) != 0 or joined.leader != joined.member_id:
        raise RuntimeError(f"JoinGroup of {group_id}: error {int(joined.error_code)}")
    connection.member_id, connection.generation = joined.member_id, int(joined.generation_id)
    assignment = ConsumerAssignment(1, ((topic, (0,)),))
    sync = {
        "group_id": group_id,
        "generation_id": connection.generation,
        "member_id": connection.member_id,
        "group_instance_id": None,
        "assignments": [{"member_id": connection.member_id, "assignment": encode_assignment(assignment)}],
    }
    synced = await connection.call(wire.SYNC_GROUP, 3, sync)
    if int(synced.error_code) != 0:
        raise RuntimeError(f"SyncGroup of {group_id}: error {int(synced.error_code)}")


def _emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run_phase(
    connections: list[LoadConnection], groups: list[str], topic: str, command: dict[str, Any], depth: int
) -> None:
    phase = Phase(depth, len(connections))
    for connection, group_id in zip(connections, groups, strict=True):
        frame, check = phase_frame(command["phase"], connection, group_id, topic)
        connection.start_phase(phase, frame, check)
    await asyncio.sleep(command["warmup_s"])
    cpu_before, started = _cpu_s(), time.perf_counter()
    phase.recording = True
    await asyncio.sleep(command["duration_s"])
    phase.recording = False
    window_s, cpu_s = time.perf_counter() - started, _cpu_s() - cpu_before
    phase.sending = False
    await asyncio.wait_for(phase.drained, 30)
    _emit(
        event="result",
        phase=command["phase"],
        count=len(phase.latencies_us),
        window_s=window_s,
        cpu_s=cpu_s,
        errors=phase.errors,
        first_error=phase.first_error,
        latencies_us=phase.latencies_us,
    )


async def main_async(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    host, _, port = args.bootstrap.rpartition(":")
    connections: list[LoadConnection] = []
    groups = [f"{args.group_prefix}{args.first + i}" for i in range(args.connections)]
    tls = ssl.create_default_context(cafile=args.cafile) if args.cafile else None
    for _ in groups:
        _, protocol = await loop.create_connection(
            LoadConnection, host, int(port), ssl=tls, server_hostname="localhost" if tls else None
        )
        if args.sasl_user:
            await scram_sha_512_login(protocol.call, args.sasl_user, args.sasl_password)
        connections.append(protocol)
    started = time.perf_counter()
    await asyncio.wait_for(
        asyncio.gather(
            *(
                join_own_group(c, g, args.topic, args.rebalance_ms, args.session_ms)
                for c, g in zip(connections, groups, strict=True)
            )
        ),
        60,
    )
    _emit(event="ready", setup_s=time.perf_counter() - started)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        command = json.loads(line)
        if command["phase"] == "quit":
            break
        await run_phase(connections, groups, args.topic, command, args.depth)
    for connection in connections:
        assert connection.transport is not None
        connection.transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--first", type=int, default=0, help="index of this worker's first group")
    parser.add_argument("--connections", type=int, required=True)
    parser.add_argument("--depth", type=int, default=1, help="requests in flight per connection")
    parser.add_argument("--topic", required=True, help="topic whose partition 0 the commits name")
    parser.add_argument("--group-prefix", default="bench-hb-", help="group ids are this plus an index")
    parser.add_argument(
        "--rebalance-ms",
        type=int,
        default=REBALANCE_MS,
        help="JoinGroup rebalance timeout (Tansu completes a join only when it expires)",
    )
    parser.add_argument("--session-ms", type=int, default=SESSION_MS, help="JoinGroup session timeout")
    parser.add_argument("--cafile", help="connect with TLS, trusting this CA (PEM)")
    parser.add_argument("--sasl-user", help="log in with SCRAM-SHA-512 as this user")
    parser.add_argument("--sasl-password", default="")
    uvloop.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
