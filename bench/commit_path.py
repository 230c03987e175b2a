"""OffsetCommit's server path in-process, without sockets: event-loop CPU per commit, per flush policy.

On a machine shared with other work, ``heartbeat_load``'s commit rate swings with whatever else
runs, and its CPU figures include the socket layer and the cache misses the generator causes.
This section measures what the commit path itself costs: a kcoord :class:`App` (file store in a
temporary directory) runs in this process's uvloop loop; ``--commit-path-groups`` (50) callers,
each the only member of its own group, call the router with an OffsetCommit v8 frame (one
partition, as ``heartbeat_load`` sends) one at a time, as a connection at depth 1 does, for
``--commit-path-commits`` (300) commits each. Reported per flush policy (``always`` and
``interval``): commits/s and the loop thread's CPU microseconds per commit (``thread_time``, which
leaves out the storage writer's ``syncfs``). The bench process takes ``kcoord serve``'s garbage
collector thresholds (:mod:`kcoord.cli.gc_tuning`). The section's server subprocess is not used.

``--commit-path-count`` counts instead of timing: after a warm-up round of commits, the measured
commits run under ``sys.settrace`` (opcodes and Python calls, a coroutine's resumptions included)
and ``sys.setprofile`` (calls of C functions), on the loop thread only. The counts do not depend
on how busy the machine is, so two versions compare on a shared one (run this file with the other
version's interpreter: ``/other/.venv/bin/python bench/run.py commit_path --commit-path-count``).
``--commit-path-depth`` (1) callers share each group, as requests in flight on one connection.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

import structlog
import uvloop

import wire
from kcoord.app import App
from kcoord.cli.gc_tuning import tune_for_serving
from kcoord.config import Settings
from kcoord.coordinator.classic.consumer_protocol import ConsumerSubscription, encode_subscription
from kcoord.server.context import ConnectionInfo
from report import Measurement
from server import BenchServer

DESCRIPTION = "OffsetCommit through the router in-process (no sockets): commits/s and loop CPU us/commit"
TOPIC = "commit-path"
POLICIES = ("always", "interval")
SETUP_TIMEOUT_S = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("commit_path")
    group.add_argument("--commit-path-groups", type=int, default=50, help="callers = groups (50)")
    group.add_argument("--commit-path-commits", type=int, default=300, help="commits per caller (300)")
    group.add_argument("--commit-path-depth", type=int, default=1, help="callers per group (1)")
    group.add_argument(
        "--commit-path-count",
        action="store_true",
        help="count opcodes, Python calls and C calls per commit instead of timing",
    )


async def _call(app: App, info: ConnectionInfo, api_key: int, version: int, body: dict[str, Any]) -> Any:
    frame = await app.router.handle(wire.encode_request(api_key, version, body)[4:], info)
    assert frame is not None
    return wire.decode_response(api_key, version, frame[4:])


async def _commit_frame(app: App, info: ConnectionInfo, group_id: str) -> bytes:
    """Join and sync ``group_id`` as its only member; the OffsetCommit v8 frame that member sends."""
    join: dict[str, Any] = {
        "group_id": group_id,
        "session_timeout": 120_000,
        "rebalance_timeout": 60_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": encode_subscription(ConsumerSubscription(1, (TOPIC,)))}],
    }
    first = await _call(app, info, wire.JOIN_GROUP, 5, join)
    joined = await _call(app, info, wire.JOIN_GROUP, 5, {**join, "member_id": first.member_id})
    if int(joined.error_code) != 0:
        raise RuntimeError(f"JoinGroup {group_id}: error {int(joined.error_code)}")
    member, generation = joined.member_id, int(joined.generation_id)
    sync = {
        "group_id": group_id,
        "generation_id": generation,
        "member_id": member,
        "group_instance_id": None,
        "assignments": [{"member_id": member, "assignment": b""}],
    }
    synced = await _call(app, info, wire.SYNC_GROUP, 3, sync)
    if int(synced.error_code) != 0:
        raise RuntimeError(f"SyncGroup {group_id}: error {int(synced.error_code)}")
    partition = {"partition_index": 0, "committed_offset": 42, "committed_metadata": ""}
    commit = {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "group_instance_id": None,
        "topics": [{"name": TOPIC, "partitions": [partition]}],
    }
    frame = wire.encode_request(wire.OFFSET_COMMIT, 8, commit)[4:]
    answer = wire.decode_response(wire.OFFSET_COMMIT, 8, (await app.router.handle(frame, info) or b"")[4:])
    codes = [int(p.error_code) for t in answer.topics for p in t.partitions]
    if codes != [0]:
        raise RuntimeError(f"OffsetCommit {group_id}: error codes {codes}")
    return frame


class _Counter:
    """Opcodes, Python calls and C calls on this thread while installed (``sys.settrace``/``setprofile``)."""

    def __init__(self) -> None:
        self.opcodes = 0
        self.python_calls = 0
        self.c_calls = 0

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            self.python_calls += 1
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return self._local
        return None

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.opcodes += 1
        return self._local

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            self.c_calls += 1

    def __enter__(self) -> _Counter:
        sys.settrace(self._trace)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)
        sys.setprofile(None)


async def _measure(
    policy: str, groups: int, commits: int, depth: int = 1, count: bool = False
) -> tuple[float, ...]:
    """(commits/s, loop-thread CPU us per commit) for one flush policy; with ``count``, (opcodes,
    Python calls, C calls) per commit instead."""
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-commit-path-") as tmp:
        flags = {
            "listeners": "127.0.0.1:0",
            "kcoord.metrics.listen": "127.0.0.1:0",
            "log.dirs": str(Path(tmp) / "data"),
            "group.initial.rebalance.delay.ms": "0",
            "log.flush.policy": policy,
        }
        app = App(Settings.load(environ={}, flags=flags))
        await app.start()
        try:
            await asyncio.wait_for(app.coordinator.loaded.wait(), SETUP_TIMEOUT_S)
            admin = ConnectionInfo(0, "127.0.0.1", 1)
            topic = {
                "name": TOPIC,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            await _call(app, admin, wire.CREATE_TOPICS, 4, {"topics": [topic], "timeout": 10_000})
            callers = [ConnectionInfo(i + 1, "127.0.0.1", 1000 + i) for i in range(groups)]
            frames = [
                await _commit_frame(app, info, f"bench-commit-path-{info.connection_id}") for info in callers
            ]

            async def caller(info: ConnectionInfo, frame: bytes) -> None:
                for _ in range(commits):
                    await app.router.handle(frame, info)

            def run_callers() -> Any:
                return asyncio.gather(
                    *(
                        caller(info, frame)
                        for info, frame in zip(callers, frames, strict=True)
                        for _ in range(depth)
                    )
                )

            total = groups * commits * depth
            if count:
                await run_callers()  # warm-up: caches, lazily built objects
                with _Counter() as counted:
                    await run_callers()
                return counted.opcodes / total, counted.python_calls / total, counted.c_calls / total
            cpu_before, started = time.thread_time(), time.perf_counter()
            await run_callers()
            cpu, wall = time.thread_time() - cpu_before, time.perf_counter() - started
        finally:
            await app.stop()
    return total / wall, cpu / total * 1e6


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings and up
    tune_for_serving()
    if options.commit_path_count:
        return _count(options)
    results: dict[str, list[tuple[float, float]]] = {policy: [] for policy in POLICIES}
    for run_number in range(options.runs):
        for policy in POLICIES:
            rate, cpu_us = uvloop.run(
                _measure(
                    policy, options.commit_path_groups, options.commit_path_commits, options.commit_path_depth
                )
            )
            results[policy].append((rate, cpu_us))
            print(f"  run {run_number + 1} {policy}: {rate:,.0f} commits/s, loop CPU {cpu_us:.1f} us/commit")
    measurements: list[Measurement] = []
    for policy in POLICIES:
        label = f"OffsetCommit, {options.commit_path_groups} callers at depth 1, flush {policy}"
        measurements += [
            Measurement(label, "commits/s", tuple(rate for rate, _ in results[policy])),
            Measurement(label, "loop CPU us/commit", tuple(cpu for _, cpu in results[policy])),
        ]
    ratios = tuple(a[1] / i[1] for a, i in zip(results["always"], results["interval"], strict=True))
    measurements.append(Measurement("loop CPU always / interval", "ratio", ratios))
    return measurements


def _count(options: argparse.Namespace) -> list[Measurement]:
    """Opcodes, Python calls and C calls per commit, per flush policy (one traced pass each)."""
    measurements: list[Measurement] = []
    for policy in POLICIES:
        opcodes, python_calls, c_calls = uvloop.run(
            _measure(
                policy,
                options.commit_path_groups,
                options.commit_path_commits,
                options.commit_path_depth,
                count=True,
            )
        )
        print(
            f"  {policy}: {opcodes:,.1f} opcodes, {python_calls:.2f} Python calls,"
            f" {c_calls:.2f} C calls per commit"
        )
        label = (
            f"OffsetCommit, {options.commit_path_groups} groups x {options.commit_path_depth}, flush {policy}"
        )
        measurements += [
            Measurement(label, "opcodes/commit", (opcodes,)),
            Measurement(label, "Python calls/commit", (python_calls,)),
            Measurement(label, "C calls/commit", (c_calls,)),
        ]
    return measurements
