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
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
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


async def _measure(policy: str, groups: int, commits: int) -> tuple[float, float]:
    """(commits/s, loop-thread CPU us per commit) for one flush policy."""
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

            cpu_before, started = time.thread_time(), time.perf_counter()
            await asyncio.gather(*(caller(info, frame) for info, frame in zip(callers, frames, strict=True)))
            cpu, wall = time.thread_time() - cpu_before, time.perf_counter() - started
        finally:
            await app.stop()
    total = groups * commits
    return total / wall, cpu / total * 1e6


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings and up
    tune_for_serving()
    results: dict[str, list[tuple[float, float]]] = {policy: [] for policy in POLICIES}
    for run_number in range(options.runs):
        for policy in POLICIES:
            rate, cpu_us = uvloop.run(
                _measure(policy, options.commit_path_groups, options.commit_path_commits)
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
