"""Heartbeat and OffsetCommit throughput over SASL_SSL (SCRAM-SHA-512) against PLAINTEXT, as a ratio.

One kcoord of its own with a PLAINTEXT and a SASL_SSL listener (a throwaway CA and server
certificate made with ``openssl``, a user added with ``kcoord users add``). Two sets of
``--secure-load-connections`` (50) raw-protocol connections (``load_worker.py``, as in
``heartbeat_load``), one per listener, each connection the only member of its own group; the SASL_SSL
set logs in with SCRAM-SHA-512 first. In each run the heartbeat phase and then the commit phase run
on the plaintext set and then on the SASL_SSL set (one set at a time, the same warm-up and window
as ``heartbeat_load``). Reported: requests/s and p99 per listener and the SASL_SSL / PLAINTEXT ratio
of each run, also per second of server CPU (what TLS costs the server, steadier than the rate on
shared cores); the generator's CPU is shown so a saturated generator is seen.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import wire
from heartbeat_load import TOPIC, PhaseResult, Workers
from report import Measurement
from server import BenchServer, running_kcoord

DESCRIPTION = "Heartbeat and OffsetCommit over SASL_SSL vs PLAINTEXT (ratio)"
USER, PASSWORD = "bench", "bench-secret"
PHASES = ("heartbeat", "commit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("secure_load")
    group.add_argument(
        "--secure-load-connections", type=int, default=50, help="connections per listener (50)"
    )


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _server_pki(directory: Path) -> tuple[Path, Path]:
    """(CA certificate, server keystore PEM) for ``localhost`` / 127.0.0.1."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=kcoord bench CA", cwd=directory)  # fmt: skip
    (directory / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=localhost", cwd=directory)  # fmt: skip
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "server.ext", cwd=directory)  # fmt: skip
    keystore = directory / "keystore.pem"
    keystore.write_text((directory / "server.key").read_text() + (directory / "server.pem").read_text())
    return directory / "ca.pem", keystore


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-secure-") as tmp:
        root = Path(tmp)
        ca, keystore = _server_pki(root)
        data_dir = root / "data"
        add_user = [sys.executable, "-m", "kcoord", "users", "add", USER, "--password-stdin"]
        subprocess.run(
            [*add_user, "--data-dir", str(data_dir)],
            input=PASSWORD + "\n",
            text=True,
            check=True,
            capture_output=True,
            timeout=60,
        )
        settings = {**server.settings, "ssl.keystore.location": str(keystore)}
        listen = "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
        with running_kcoord(settings, data_dir=data_dir, watch=("kcoord.started",), listen=listen) as secure:
            return _measure(secure, ca, options)


def _measure(server: BenchServer, ca: Path, options: argparse.Namespace) -> list[Measurement]:
    started = server.events.wait("kcoord.started", 10)
    assert started is not None
    addresses = started[1]["listeners"]
    wire.create_topic(addresses["PLAINTEXT"], TOPIC, 1)
    connections = options.secure_load_connections
    sets = {
        "PLAINTEXT": Workers(addresses["PLAINTEXT"], connections, 1, 1, ("--group-prefix", "bench-plain-")),
        "SASL_SSL": Workers(
            addresses["SASL_SSL"],
            connections,
            1,
            1,
            (
                "--group-prefix",
                "bench-sasl-",
                "--cafile",
                str(ca),
                "--sasl-user",
                USER,
                "--sasl-password",
                PASSWORD,
            ),
        ),
    }
    results: dict[tuple[str, str], list[PhaseResult]] = {(p, n): [] for p in PHASES for n in sets}
    try:
        for name, workers in sets.items():
            print(f"  {name}: {connections} groups joined and synced in {workers.wait_ready():.1f} s")
        for run_number in range(options.runs):
            for phase in PHASES:
                for name, workers in sets.items():
                    result = workers.run_phase(
                        phase, options.heartbeat_load_warmup, options.heartbeat_load_seconds, server.pid
                    )
                    results[(phase, name)].append(result)
                    print(
                        f"  run {run_number + 1} {phase} {name}: {result.rate:,.0f}/s, "
                        f"p99 {result.p99_ms:.2f} ms, server CPU {result.server_cpu:.0f}%, "
                        f"generator CPU {result.generator_cpu:.0f}%",
                        flush=True,
                    )
    finally:
        for workers in sets.values():
            workers.close()
    measurements: list[Measurement] = []
    for phase in PHASES:
        for name in sets:
            label, runs = f"{phase} {name}", results[(phase, name)]
            measurements += [
                Measurement(label, "requests/s", tuple(r.rate for r in runs)),
                Measurement(label, "p99 ms", tuple(r.p99_ms for r in runs)),
                Measurement(label, "per server CPU-s", tuple(_per_cpu_s(r) for r in runs)),
                Measurement(label, "generator CPU %", tuple(r.generator_cpu for r in runs)),
            ]
        pairs = list(zip(results[(phase, "SASL_SSL")], results[(phase, "PLAINTEXT")], strict=True))
        label = f"{phase} SASL_SSL / PLAINTEXT"
        measurements += [
            Measurement(label, "ratio", tuple(s.rate / p.rate for s, p in pairs)),
            Measurement(
                label, "ratio per server CPU-s", tuple(_per_cpu_s(s) / _per_cpu_s(p) for s, p in pairs)
            ),
        ]
    return measurements


def _per_cpu_s(result: PhaseResult) -> float:
    """Requests per second of server CPU: the server's cost, steadier than the rate on shared cores."""
    return result.rate / max(result.server_cpu / 100, 1e-9)
