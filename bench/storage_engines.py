"""Heartbeat and OffsetCommit throughput and latency on the ``postgresql://`` engine against ``file://``.

The section's own server (file engine under its temporary data directory, flush policy as set,
default ``always``) is measured, then a second kcoord on ``--storage postgresql://`` against a
throwaway PostgreSQL 15 cluster this section starts (``tests/support/postgres.py``: Debian's
binaries, run as the ``postgres`` user under root, fsync on, one loopback port) — or against
``--storage-engines-pg-url`` when given. Both get the same raw-protocol load as ``heartbeat_load``
(``--storage-engines-connections`` groups, one member each, in ``--storage-engines-workers``
processes, closed loop at depth 1): a Heartbeat phase and an OffsetCommit phase (every commit is
one record appended to the offsets log and durable before its answer: fdatasync for the file
engine, a committed transaction for PostgreSQL). Reported per engine: requests/s, p50/p99, server
CPU, and within each run the PostgreSQL/file ratios of commit rate and commit p99.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import wire
from heartbeat_load import TOPIC, PhaseResult, Workers
from report import Measurement
from server import BenchServer, running_kcoord

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.postgres import PostgresCluster

DESCRIPTION = "Heartbeat and OffsetCommit rate and p99 on postgresql:// against file://"
PHASES = ("heartbeat", "commit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("storage_engines")
    group.add_argument("--storage-engines-connections", type=int, default=100, help="groups (100)")
    group.add_argument("--storage-engines-workers", type=int, default=2, help="generator processes (2)")
    group.add_argument("--storage-engines-seconds", type=float, default=3.0, help="window per phase (3)")
    group.add_argument("--storage-engines-warmup", type=float, default=0.5, help="warm-up per phase (0.5)")
    group.add_argument(
        "--storage-engines-pg-url", default="", help="use this database instead of a throwaway cluster"
    )


@contextlib.contextmanager
def _database(url: str) -> Iterator[str]:
    if url:
        yield url
        return
    cluster = PostgresCluster().start()
    try:
        yield cluster.create_database("bench")
    finally:
        cluster.stop()


def _measure(server: BenchServer, options: argparse.Namespace, engine: str) -> dict[str, list[PhaseResult]]:
    wire.create_topic(server.bootstrap, TOPIC, 1)
    workers = Workers(
        server.bootstrap, options.storage_engines_connections, options.storage_engines_workers, 1
    )
    results: dict[str, list[PhaseResult]] = {phase: [] for phase in PHASES}
    try:
        print(
            f"  {engine}: {options.storage_engines_connections} groups ready in {workers.wait_ready():.1f} s"
        )
        for run_number in range(options.runs):
            for phase in PHASES:
                result = workers.run_phase(
                    phase, options.storage_engines_warmup, options.storage_engines_seconds, server.pid
                )
                results[phase].append(result)
                print(
                    f"  run {run_number + 1} {engine} {phase}: {result.rate:,.0f}/s, "
                    f"p50 {result.p50_ms:.2f} ms, p99 {result.p99_ms:.2f} ms, "
                    f"server CPU {result.server_cpu:.0f}%",
                    flush=True,
                )
    finally:
        workers.close()
    return results


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    by_engine = {"file": _measure(server, options, "file")}
    with _database(options.storage_engines_pg_url) as url:
        settings = {**server.settings, "kcoord.storage.url": url}
        with running_kcoord(settings) as pg_server:
            by_engine["postgresql"] = _measure(pg_server, options, "postgresql")
    measurements: list[Measurement] = []
    for engine, phases in by_engine.items():
        for phase, results in phases.items():
            label = f"{phase} on {engine}"
            measurements += [
                Measurement(label, "requests/s", tuple(r.rate for r in results)),
                Measurement(label, "p50 ms", tuple(r.p50_ms for r in results)),
                Measurement(label, "p99 ms", tuple(r.p99_ms for r in results)),
                Measurement(label, "server CPU %", tuple(r.server_cpu for r in results)),
            ]
    for phase in PHASES:
        pg, file = by_engine["postgresql"][phase], by_engine["file"][phase]
        measurements.append(
            Measurement(
                f"{phase} postgresql / file",
                "rate ratio",
                tuple(p.rate / f.rate for p, f in zip(pg, file, strict=True)),
            )
        )
        measurements.append(
            Measurement(
                f"{phase} postgresql / file",
                "p99 ratio",
                tuple(p.p99_ms / f.p99_ms for p, f in zip(pg, file, strict=True)),
            )
        )
    return measurements
