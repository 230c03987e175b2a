"""A long fuzz run: random and structured requests for every advertised API version, for minutes.

Each request goes on a fresh loopback connection (a closed connection is one of the answers); the
kinds of frames are those of ``tests/support/fuzz_frames.py`` (random bytes after a valid header, random
schema-valid requests, and valid requests with a length bomb spliced in, bytes flipped, cut short or
extended) plus the known crashing frames. A bystander connection sends ApiVersions every 20 ms
throughout; its worst latency is a figure. The server's RSS is sampled every second, and its log is
tallied for tracebacks and warnings. The run stops at ``--fuzz-seconds`` or ``--fuzz-max-requests``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fuzz_frames import advertised, fuzz_frame
from tests.support.fuzz_run import Bystander, FuzzStats, api_name, rss_bytes, send_one
from tests.support.hostile_frames import ALL, request_frame

from report import Measurement
from server import BenchServer

DESCRIPTION = (
    "fuzzed requests for every advertised API version; server up, bystander latency, RSS, tracebacks"
)
MB = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("fuzz")
    group.add_argument("--fuzz-seconds", type=float, default=60.0, help="length of each run (default 60)")
    group.add_argument(
        "--fuzz-max-requests", type=int, default=1_000_000, help="requests per run at most (default 1e6)"
    )
    group.add_argument("--fuzz-seed", type=int, default=1, help="seed of the first run (default 1)")
    group.add_argument(
        "--fuzz-wait", type=float, default=0.05, help="seconds to wait for an answer or a close (0.05)"
    )


def _one_run(server: BenchServer, options: argparse.Namespace, seed: int) -> dict[str, float]:
    host, _, port_text = server.bootstrap.rpartition(":")
    port = int(port_text)
    rng = random.Random(seed)
    targets = advertised()
    stats = FuzzStats()
    tally = server.tally
    before = (tally.tracebacks, tally.warnings, tally.errors)
    rss_start = rss_max = rss_bytes(server.pid)
    next_sample = time.monotonic() + 1
    started = time.monotonic()
    deadline = started + options.fuzz_seconds
    with Bystander(host, port) as bystander:
        for known in ALL:
            stats.outcome(known.name, send_one(host, port, request_frame(*known[1:]), options.fuzz_wait))
        while time.monotonic() < deadline and stats.sent < options.fuzz_max_requests:
            api_key, version = rng.choice(targets)
            frame = fuzz_frame(api_key, version, rng, correlation_id=stats.sent)
            stats.outcome(f"{api_name(api_key, version)}", send_one(host, port, frame, options.fuzz_wait))
            if server.proc.poll() is not None:
                raise RuntimeError(f"the server died after {stats.sent} requests")
            if time.monotonic() >= next_sample:
                rss_max = max(rss_max, rss_bytes(server.pid))
                next_sample += 1
        elapsed = time.monotonic() - started
        if bystander.failure is not None:
            raise RuntimeError(f"the bystander failed: {bystander.failure!r}")
        rss_end = rss_bytes(server.pid)
        worst_ms = bystander.worst_s * 1000
        rounds = bystander.rounds
    _print_per_api(seed, stats.per_api)
    if tally.tracebacks > before[0]:
        print("\n".join(tally.last_traceback[-20:]))
    return {
        "requests": stats.sent,
        "requests/s": stats.sent / elapsed,
        "answered": stats.answered,
        "closed": stats.closed,
        "silent": stats.silent,
        "bystander rounds": rounds,
        "bystander worst": worst_ms,
        "rss start": rss_start / MB,
        "rss max": max(rss_max, rss_end) / MB,
        "rss end": rss_end / MB,
        "log warnings": tally.warnings - before[1],
        "log errors": tally.errors - before[2],
        "log tracebacks": tally.tracebacks - before[0],
    }


def _print_per_api(seed: int, per_api: Counter[str]) -> None:
    cells = ", ".join(f"{name} {count}" for name, count in sorted(per_api.items()) if count > 1)
    print(f"  run with seed {seed}, requests per API: {cells}", flush=True)


_UNITS = {"requests/s": "req/s", "bystander worst": "ms", "rss start": "MB", "rss max": "MB", "rss end": "MB"}


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    runs = [_one_run(server, options, options.fuzz_seed + index) for index in range(options.runs)]
    return [
        Measurement(metric, _UNITS.get(metric, "count"), tuple(figures[metric] for figures in runs))
        for metric in runs[0]
    ]
