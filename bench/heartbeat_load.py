"""Heartbeats/s, OffsetCommits/s and ApiVersions/s from a raw-protocol load generator.

``--heartbeat-load-connections`` (200) connections are spread over ``--heartbeat-load-workers``
(2) worker processes (``load_worker.py``, uvloop, no client library). Every connection first
becomes the only member of its own group (JoinGroup v5 with a member id after MEMBER_ID_REQUIRED,
SyncGroup v3 as leader; session 120 s), so 200 connections are 200 groups. Then each run has four
phases on the same connections, back to back: Heartbeat v4, ApiVersions v3, OffsetCommit v8 (one
partition, the same offset every time; every commit is a record appended to the offsets log, and
with the default ``log.flush.policy=always`` it is flushed before the answer) and OffsetFetch v8
(one group, the partition just committed). In a phase every
connection keeps ``--heartbeat-load-depth`` (1: no pipelining) requests in flight; a phase warms
up for ``--heartbeat-load-warmup`` s and then counts answers for ``--heartbeat-load-seconds`` s.

Reported per phase: requests/s (all workers), p50/p99 latency (send to answer, in the worker), the
server's CPU (its /proc utime+stime over the window, 100% = one core), requests per second of
server CPU and CPU microseconds per request, of the whole server and of its event-loop thread
alone (steadier than the rate when other processes take the cores; the loop thread's figure
leaves out the storage writer, whose ``syncfs`` also pays for other processes' dirty pages),
and the generator's CPU
(sum over workers). The heartbeat/ApiVersions and OffsetFetch/heartbeat ratios are computed within
each run. Every answer is
checked (first decoded, the rest compared by bytes), and any error fails the section.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import wire
from report import Measurement
from server import BenchServer

DESCRIPTION = "a group per connection: Heartbeat, ApiVersions, OffsetCommit, OffsetFetch rates, latencies"
WORKER = Path(__file__).resolve().parent / "load_worker.py"
TOPIC = "bench-load"
READY_TIMEOUT_S = 120.0
PHASES = ("heartbeat", "api_versions", "commit", "fetch", "metadata")
_TICKS = os.sysconf("SC_CLK_TCK")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("heartbeat_load")
    group.add_argument(
        "--heartbeat-load-connections", type=int, default=200, help="connections = groups (200)"
    )
    group.add_argument("--heartbeat-load-workers", type=int, default=2, help="generator processes (2)")
    group.add_argument(
        "--heartbeat-load-depth", type=int, default=1, help="requests in flight per connection (1)"
    )
    group.add_argument(
        "--heartbeat-load-seconds", type=float, default=3.0, help="measured window per phase (3)"
    )
    group.add_argument("--heartbeat-load-warmup", type=float, default=0.5, help="warm-up per phase (0.5)")
    group.add_argument(
        "--heartbeat-load-phases",
        default="heartbeat,api_versions,commit,fetch",
        help=f"comma-separated phases to run, in this order ({','.join(PHASES)})",
    )


@dataclass(frozen=True)
class PhaseResult:
    rate: float
    p50_ms: float
    p99_ms: float
    server_cpu: float
    loop_cpu: float
    generator_cpu: float


def server_cpu_s(pid: int) -> float:
    """User plus system CPU seconds the process has used so far (Linux /proc)."""
    return _cpu_s_of(Path(f"/proc/{pid}/stat"))


def loop_thread_cpu_s(pid: int) -> float:
    """CPU seconds of the server's main thread alone: the event loop, without the storage writer.

    From the scheduler's own count (``schedstat``, nanoseconds) where the kernel keeps one: the
    clock-tick counts of ``stat`` are too coarse for a few formations' worth of CPU."""
    try:
        return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return _cpu_s_of(Path(f"/proc/{pid}/task/{pid}/stat"))


def _cpu_s_of(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _percentile(sorted_values: list[int], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    return float(sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))])


class Workers:
    """The generator processes; each takes a slice of the connections and answers phase commands."""

    def __init__(
        self, bootstrap: str, connections: int, workers: int, depth: int, extra_args: tuple[str, ...] = ()
    ) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        share, extra = divmod(connections, workers)
        first = 0
        for index in range(workers):
            count = share + (1 if index < extra else 0)
            command = [sys.executable, str(WORKER), "--bootstrap", bootstrap, "--first", str(first)]
            command += ["--connections", str(count), "--depth", str(depth), "--topic", TOPIC, *extra_args]
            self.procs.append(
                subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            )
            first += count

    def wait_ready(self) -> float:
        """Seconds the slowest worker took to join and sync all its groups."""
        return max(float(self._read(proc)["setup_s"]) for proc in self.procs)

    def run_phase(self, phase: str, warmup_s: float, duration_s: float, server_pid: int) -> PhaseResult:
        command = json.dumps({"phase": phase, "warmup_s": warmup_s, "duration_s": duration_s}) + "\n"
        for proc in self.procs:
            self._stdin(proc).write(command)
            self._stdin(proc).flush()
        time.sleep(warmup_s)
        cpu_before, loop_before = server_cpu_s(server_pid), loop_thread_cpu_s(server_pid)
        started = time.monotonic()
        time.sleep(duration_s)
        elapsed = time.monotonic() - started
        server_cpu = (server_cpu_s(server_pid) - cpu_before) / elapsed
        loop_cpu = (loop_thread_cpu_s(server_pid) - loop_before) / elapsed
        results = [self._read(proc) for proc in self.procs]
        errors = [r for r in results if r["errors"]]
        if errors:
            raise RuntimeError(
                f"{phase}: {errors[0]['errors']} bad answers, first: {errors[0]['first_error']}"
            )
        latencies = sorted(lat for r in results for lat in r["latencies_us"])
        window = max(r["window_s"] for r in results)
        return PhaseResult(
            rate=sum(r["count"] for r in results) / window,
            p50_ms=_percentile(latencies, 0.50) / 1000,
            p99_ms=_percentile(latencies, 0.99) / 1000,
            server_cpu=server_cpu * 100,
            loop_cpu=loop_cpu * 100,
            generator_cpu=sum(r["cpu_s"] for r in results) / window * 100,
        )

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    self._stdin(proc).write(json.dumps({"phase": "quit"}) + "\n")
                    self._stdin(proc).flush()
                    proc.wait(10)
                except (OSError, subprocess.TimeoutExpired):
                    proc.kill()
                    proc.wait(5)

    @staticmethod
    def _stdin(proc: subprocess.Popen[str]) -> IO[str]:
        assert proc.stdin is not None
        return proc.stdin

    @staticmethod
    def _read(proc: subprocess.Popen[str]) -> dict[str, Any]:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"load worker {proc.pid} exited with {proc.wait(10)}")
        event: dict[str, Any] = json.loads(line)
        return event


def _us_per(cpu_percent: float, rate: float) -> float:
    """Microseconds of CPU per request from a CPU share (100 = one core) and a request rate."""
    return cpu_percent / 100 / max(rate, 1e-9) * 1e6


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    wire.create_topic(server.bootstrap, TOPIC, 1)
    workers = Workers(
        server.bootstrap,
        options.heartbeat_load_connections,
        options.heartbeat_load_workers,
        options.heartbeat_load_depth,
    )
    phases = [phase for phase in options.heartbeat_load_phases.split(",") if phase]
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise SystemExit(f"unknown heartbeat_load phases: {', '.join(sorted(unknown))}")
    per_phase: dict[str, list[PhaseResult]] = {phase: [] for phase in phases}
    try:
        print(
            f"  {options.heartbeat_load_connections} groups joined and synced in {workers.wait_ready():.1f} s"
        )
        for run_number in range(options.runs):
            for phase in phases:
                result = workers.run_phase(
                    phase, options.heartbeat_load_warmup, options.heartbeat_load_seconds, server.pid
                )
                per_phase[phase].append(result)
                print(
                    f"  run {run_number + 1} {phase}: {result.rate:,.0f}/s, p50 {result.p50_ms:.2f} ms, "
                    f"p99 {result.p99_ms:.2f} ms, server CPU {result.server_cpu:.0f}% "
                    f"({_us_per(result.server_cpu, result.rate):.0f} us/request; event loop "
                    f"{_us_per(result.loop_cpu, result.rate):.0f}), "
                    f"generator CPU {result.generator_cpu:.0f}%",
                    flush=True,
                )
    finally:
        workers.close()
    depth = options.heartbeat_load_depth
    measurements: list[Measurement] = []
    for phase in phases:
        results = per_phase[phase]
        label = f"{phase} (depth {depth})"
        measurements += [
            Measurement(label, "requests/s", tuple(r.rate for r in results)),
            Measurement(label, "p50 ms", tuple(r.p50_ms for r in results)),
            Measurement(label, "p99 ms", tuple(r.p99_ms for r in results)),
            Measurement(label, "server CPU %", tuple(r.server_cpu for r in results)),
            Measurement(
                label,
                "requests per server CPU-s",
                tuple(r.rate / max(r.server_cpu / 100, 1e-9) for r in results),
            ),
            Measurement(
                label, "server CPU us/request", tuple(_us_per(r.server_cpu, r.rate) for r in results)
            ),
            Measurement(
                label, "event-loop CPU us/request", tuple(_us_per(r.loop_cpu, r.rate) for r in results)
            ),
            Measurement(label, "generator CPU %", tuple(r.generator_cpu for r in results)),
        ]
    for top, bottom in (("heartbeat", "api_versions"), ("fetch", "heartbeat")):
        if top in per_phase and bottom in per_phase:
            ratios = tuple(t.rate / b.rate for t, b in zip(per_phase[top], per_phase[bottom], strict=True))
            measurements.append(Measurement(f"{top} / {bottom} (target >= 0.8)", "ratio", ratios))
    return measurements
