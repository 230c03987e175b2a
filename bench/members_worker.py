"""One client process of ``members_scale``: many members, each on its own connection, heartbeating.

Run as ``python members_worker.py --bootstrap H:P --groups A:B --members M --interval S``: for each
group index in ``[A, B)``, ``M`` members of group ``bench-scale-<index>``, each on its own
connection (all connections opened at once: the storm). Each member joins (JoinGroup v5, again
with its id after MEMBER_ID_REQUIRED), syncs (the leader assigns nothing), then heartbeats every
``--interval`` seconds (v4, the first one at a random point of the interval), rejoining when a
heartbeat answers REBALANCE_IN_PROGRESS. Answers are read by their bytes (no decoding per
heartbeat: at 100,000 members the generator's CPU would otherwise be the bound).

Prints JSON lines: ``{"event": "formed", ...}`` once every member has had a heartbeat answered
NONE after its sync (with the connects that failed and the seconds taken), then, for each
``{"measure": seconds}`` line on stdin, ``{"event": "measured", "latencies_us": [...], ...}`` with
every heartbeat latency of the window (the generator's garbage collector is off during it, so its
pauses do not count as the server's latency); ``{"quit": true}`` ends it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import uvloop

import wire
from load_worker import LoadConnection

NONE, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 0, 27, 79
UNKNOWN_MEMBER_ID = 25
RETRIABLE = frozenset({7, 14, 15, 16, 22, 25, 27})
"""REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE, NOT_COORDINATOR,
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS: a client joins again (and counts it)."""
RETRY_BACKOFF_S = 0.1
CONNECT_TIMEOUT_S = 30.0


class Window:
    """Latencies recorded while a measurement window is open."""

    def __init__(self) -> None:
        self.latencies_us: list[int] | None = None
        self.errors = 0
        self.retries = 0
        """Joins and syncs answered with a retriable error (retried, as a client does), all along."""


async def _raw_call(connection: LoadConnection, frame: bytes) -> bytes:
    """Sends a pre-encoded frame and returns the raw answer (size prefix removed)."""
    assert connection.transport is not None
    waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    connection._setup.append(waiter)
    connection.transport.write(frame)
    return await waiter


async def member(
    connection: LoadConnection,
    group: str,
    interval_s: float,
    formed: asyncio.Future[None],
    pending: list[int],
    window: Window,
) -> None:
    body: dict[str, Any] = {
        "group_id": group,
        "session_timeout": 45_000,
        "rebalance_timeout": 60_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    counted = False
    while True:
        joined = await connection.call(wire.JOIN_GROUP, 5, body)
        code = int(joined.error_code)
        if code == MEMBER_ID_REQUIRED:
            body["member_id"] = joined.member_id
            continue
        if code in RETRIABLE:
            window.retries += 1
            if code == UNKNOWN_MEMBER_ID:
                body["member_id"] = ""
            await asyncio.sleep(RETRY_BACKOFF_S)
            continue
        if code != NONE:
            raise RuntimeError(f"JoinGroup {group}: error {code}")
        body["member_id"] = joined.member_id
        generation = int(joined.generation_id)
        leader = joined.leader == joined.member_id
        sync = {
            "group_id": group,
            "generation_id": generation,
            "member_id": joined.member_id,
            "group_instance_id": None,
            "assignments": [{"member_id": m.member_id, "assignment": b""} for m in joined.members]
            if leader
            else [],
        }
        synced = await connection.call(wire.SYNC_GROUP, 3, sync)
        if int(synced.error_code) in RETRIABLE:
            window.retries += int(synced.error_code) != REBALANCE_IN_PROGRESS
            continue
        if int(synced.error_code) != NONE:
            raise RuntimeError(f"SyncGroup {group}: error {int(synced.error_code)}")
        beat = wire.encode_request(
            wire.HEARTBEAT,
            4,
            {
                "group_id": group,
                "generation_id": generation,
                "member_id": joined.member_id,
                "group_instance_id": None,
            },
        )
        await asyncio.sleep(random.uniform(0, interval_s) if not counted else interval_s)
        while True:
            started = time.perf_counter()
            answer = await _raw_call(connection, beat)
            latency_us = int((time.perf_counter() - started) * 1e6)
            code = int.from_bytes(answer[9:11], "big", signed=True)  # correlation, tags, throttle
            if window.latencies_us is not None:
                window.latencies_us.append(latency_us)
            if code in RETRIABLE:
                window.retries += code != REBALANCE_IN_PROGRESS
                break
            if code != NONE:
                window.errors += 1
                break
            if not counted:
                counted = True
                pending[0] -= 1
                if pending[0] == 0 and not formed.done():
                    formed.set_result(None)
            await asyncio.sleep(max(0.0, interval_s - (time.perf_counter() - started)))


async def _connect(host: str, port: int) -> LoadConnection | BaseException:
    loop = asyncio.get_running_loop()
    try:
        _, protocol = await asyncio.wait_for(
            loop.create_connection(LoadConnection, host, port), CONNECT_TIMEOUT_S
        )
    except (OSError, TimeoutError) as exc:
        return exc
    return protocol


def _emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def main_async(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    host, _, port = args.bootstrap.rpartition(":")
    first, _, last = args.groups.partition(":")
    groups = [f"bench-scale-{index}" for index in range(int(first), int(last)) for _ in range(args.members)]
    started = time.perf_counter()
    results = await asyncio.gather(*(_connect(host, int(port)) for _ in groups))
    connections = [r for r in results if isinstance(r, LoadConnection)]
    failed = [type(r).__name__ for r in results if not isinstance(r, LoadConnection)]
    connected_s = time.perf_counter() - started
    formed: asyncio.Future[None] = loop.create_future()
    window = Window()
    pending = [len(connections)]
    if not connections:
        formed.set_result(None)
    tasks = [
        asyncio.ensure_future(member(c, g, args.interval, formed, pending, window))
        for c, g in zip(connections, groups, strict=False)
    ]
    await asyncio.wait([formed, *tasks], return_when=asyncio.FIRST_COMPLETED, timeout=args.form_timeout)
    crashed = [t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
    _emit(
        event="formed",
        formed=formed.done(),
        members=len(connections),
        unformed=pending[0],
        connect_failures=len(failed),
        connect_failure_kinds=sorted(set(failed)),
        member_failures=len(crashed),
        retries=window.retries,
        first_failure=repr(crashed[0].exception()) if crashed else "",
        connect_s=connected_s,
        formed_s=time.perf_counter() - started,
    )
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        command = json.loads(line)
        if command.get("quit"):
            break
        # The generator's own collector pauses would count as heartbeat latency: none in the window.
        gc.collect()
        gc.freeze()
        gc.disable()
        window.latencies_us, window.errors = [], 0
        cpu_before = _cpu_s()
        await asyncio.sleep(float(command["measure"]))
        latencies, window.latencies_us = window.latencies_us, None
        gc.enable()
        _emit(event="measured", latencies_us=latencies, errors=window.errors, cpu_s=_cpu_s() - cpu_before)
    for task in tasks:
        task.cancel()
    for connection in connections:
        if connection.transport is not None:
            connection.transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--groups", required=True, help="FIRST:END group indexes")
    parser.add_argument("--members", type=int, default=10, help="members per group")
    parser.add_argument("--interval", type=float, default=3.0, help="heartbeat interval, seconds")
    parser.add_argument("--form-timeout", type=float, default=300.0, help="longest wait for formation")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    uvloop.run(main_async(args))


if __name__ == "__main__":
    main()
