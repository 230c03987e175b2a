"""Start a kcoord subprocess on a free loopback port for a benchmark, and stop it afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT_S = 30.0


class LogTally:
    """What the server's log said: tracebacks, warnings and errors (the fuzz section reads it)."""

    def __init__(self) -> None:
        self.tracebacks = 0
        self.warnings = 0
        self.errors = 0
        self.last_traceback: list[str] = []


class BenchServer:
    """A running ``kcoord serve``; ``bootstrap`` is the address it bound."""

    def __init__(
        self, proc: subprocess.Popen[bytes], bootstrap: str, data_dir: Path, tally: LogTally | None = None
    ) -> None:
        self.proc = proc
        self.bootstrap = bootstrap
        self.data_dir = data_dir
        self.tally = tally or LogTally()

    @property
    def pid(self) -> int:
        return self.proc.pid


def _wait_for_start(proc: subprocess.Popen[bytes], tail: list[str], tally: LogTally) -> str | None:
    """Read the log until ``kcoord.started``; keep reading (and dropping) in a thread afterwards."""
    assert proc.stderr is not None
    found: list[str] = []
    started = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            tail[:] = [*tail[-40:], line]
            if "Traceback" in line:
                tally.tracebacks += 1
                tally.last_traceback = list(tail)
            if '"level": "warning"' in line:
                tally.warnings += 1
            elif '"level": "error"' in line:
                tally.errors += 1
            if not started.is_set():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("event") == "kcoord.started":
                    found.append(str(event["listen"]))
                    started.set()
        started.set()

    threading.Thread(target=read, daemon=True).start()
    started.wait(START_TIMEOUT_S)
    return found[0] if found else None


@contextmanager
def running_kcoord(settings: dict[str, str]) -> Iterator[BenchServer]:
    """A kcoord subprocess with its own temporary data directory, killed on exit."""
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        command = [
            sys.executable,
            "-m",
            "kcoord",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            str(data_dir),
        ]
        command += ["--metrics-listen", "127.0.0.1:0"]
        for name, value in settings.items():
            command += ["--set", f"{name}={value}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        tail: list[str] = []
        try:
            tally = LogTally()
            listen = _wait_for_start(proc, tail, tally)
            if listen is None:
                raise RuntimeError("kcoord did not start:\n" + "\n".join(tail))
            yield BenchServer(proc, listen, data_dir, tally)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
