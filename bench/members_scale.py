"""How many members one node holds: N members in N/10 groups, each on its own connection.

For each N of ``--members-scale-steps`` (1,000, 5,000, 10,000, 20,000, 50,000, 100,000), a kcoord
of its own (``group.initial.rebalance.delay.ms`` 3,000, Kafka's default, so a group's ten members
form one generation; descriptor limit raised to the hard limit) and ``--members-scale-workers`` (4)
client processes (``members_worker.py``) that open all their connections at once (the connect
storm), join N/10 groups of 10 and heartbeat every ``--members-scale-interval`` seconds (3, the
clients' default). Once every member has had a heartbeat answered, ``--members-scale-seconds``
(15) are measured. The ramp stops after the first N whose heartbeat p99 passes
``--members-scale-p99-ms`` (10) or that cannot be held (connects failed, members not formed).

Reported per N: connects that failed, formation time (the storm and every group's join and sync,
up to every member's first answered heartbeat), heartbeat p50/p99/max in the window, heartbeats/s,
the server's CPU in the window (100% = one core), its RSS per member (RSS after formation minus
RSS before the storm, over N) and the generator's CPU.

Each process's descriptor limit is its hard limit (``ulimit -Hn``): on a machine where that is
20,000 (a container without CAP_SYS_RESOURCE) one server process cannot hold more than about
19,000 connections, and that is what bounds N there.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from heartbeat_load import server_cpu_s
from report import Measurement
from server import BenchServer, running_kcoord

DESCRIPTION = "N members in N/10 groups, a connection each, heartbeating every 3 s: latency, RSS, CPU"
WORKER = Path(__file__).resolve().parent / "members_worker.py"
MIB = 1 << 20
_PAGE = os.sysconf("SC_PAGE_SIZE")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("members_scale")
    group.add_argument(
        "--members-scale-steps",
        default="1000,5000,10000,20000,50000,100000",
        help="member counts to ramp through (multiples of 10)",
    )
    group.add_argument("--members-scale-workers", type=int, default=4, help="client processes (4)")
    group.add_argument("--members-scale-interval", type=float, default=3.0, help="heartbeat interval (3 s)")
    group.add_argument("--members-scale-seconds", type=float, default=15.0, help="measured window (15 s)")
    group.add_argument("--members-scale-p99-ms", type=float, default=10.0, help="stop past this p99 (10)")


def _rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE


def _raise_descriptor_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _stdin(proc: subprocess.Popen[str]) -> IO[str]:
    assert proc.stdin is not None
    return proc.stdin


def _read(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"members worker {proc.pid} exited with {proc.wait(10)}")
    event: dict[str, Any] = json.loads(line)
    return event


def _percentile(values: list[int], fraction: float) -> float:
    if not values:
        return float("nan")
    return float(values[min(len(values) - 1, int(fraction * len(values)))])


def _one_step(server: BenchServer, members: int, options: argparse.Namespace) -> dict[str, float]:
    groups = members // 10
    workers = max(1, min(options.members_scale_workers, groups))
    rss_before = _rss_bytes(server.pid)
    procs: list[subprocess.Popen[str]] = []
    first = 0
    for index in range(workers):
        count = groups // workers + (1 if index < groups % workers else 0)
        command = [sys.executable, str(WORKER), "--bootstrap", server.bootstrap]
        command += ["--groups", f"{first}:{first + count}", "--interval", str(options.members_scale_interval)]
        procs.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        first += count
    try:
        formed = [_read(proc) for proc in procs]
        failures = sum(f["connect_failures"] + f["member_failures"] + f["unformed"] for f in formed)
        for f in formed:
            if f["first_failure"] or f["connect_failure_kinds"]:
                print(f"  worker: {f['connect_failure_kinds']} {f['first_failure']}", flush=True)
        rss_formed = _rss_bytes(server.pid)
        cpu_before, started = server_cpu_s(server.pid), time.monotonic()
        for proc in procs:
            _stdin(proc).write(json.dumps({"measure": options.members_scale_seconds}) + "\n")
            _stdin(proc).flush()
        measured = [_read(proc) for proc in procs]
        elapsed = time.monotonic() - started
        server_cpu = (server_cpu_s(server.pid) - cpu_before) / elapsed * 100
        for proc in procs:
            _stdin(proc).write(json.dumps({"quit": True}) + "\n")
            _stdin(proc).flush()
    finally:
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    latencies = sorted(lat for m in measured for lat in m["latencies_us"])
    return {
        "failed connects or members": float(failures),
        "formation s": max(f["formed_s"] for f in formed),
        "joins retried in formation": float(sum(f["retries"] for f in formed)),
        "heartbeat p50 ms": _percentile(latencies, 0.5) / 1000,
        "heartbeat p99 ms": _percentile(latencies, 0.99) / 1000,
        "heartbeat max ms": (latencies[-1] if latencies else float("nan")) / 1000,
        "heartbeats/s": len(latencies) / options.members_scale_seconds,
        "heartbeat errors": float(sum(m["errors"] for m in measured)),
        "server CPU %": server_cpu,
        "server RSS MiB": rss_formed / MIB,
        "RSS per member KiB": (rss_formed - rss_before) / members / 1024,
        "generator CPU %": sum(m["cpu_s"] for m in measured) / elapsed * 100,
    }


def run(given: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    settings = {**given.settings, "group.initial.rebalance.delay.ms": "3000"}
    steps = [int(step) for step in options.members_scale_steps.split(",") if step]
    measurements: list[Measurement] = []
    for members in steps:
        with running_kcoord(settings, preexec_fn=_raise_descriptor_limit) as server:
            figures = _one_step(server, members, options)
        print(
            f"  {members:,} members: " + ", ".join(f"{name} {value:,.2f}" for name, value in figures.items()),
            flush=True,
        )
        measurements += [
            Measurement(f"{members:,} members", name, (value,)) for name, value in figures.items()
        ]
        if (
            figures["heartbeat p99 ms"] > options.members_scale_p99_ms
            or figures["failed connects or members"]
        ):
            print(f"  stopped at {members:,} members", flush=True)
            break
    return measurements
