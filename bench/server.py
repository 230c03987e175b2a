"""Start a kcoord subprocess on a free loopback port for a benchmark, and stop it afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 30.0


class WatchedEvents:
    """Log events of chosen names, as the server's log reader thread sees them, with their arrival time."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)
        self._seen: dict[str, tuple[float, dict[str, Any]]] = {}
        self._changed = threading.Condition()

    def saw(self, event: dict[str, Any]) -> None:
        name = event.get("event")
        if name in self.names:
            with self._changed:
                self._seen[str(name)] = (time.monotonic(), event)
                self._changed.notify_all()

    def wait(self, name: str, timeout_s: float) -> tuple[float, dict[str, Any]] | None:
        """(monotonic arrival time, event) of the first ``name`` event, or None after ``timeout_s``."""
        with self._changed:
            self._changed.wait_for(lambda: name in self._seen, timeout_s)
            return self._seen.get(name)


class LogTally:
    """What the server's log said: tracebacks, warnings and errors (the fuzz section reads it)."""

    def __init__(self) -> None:
        self.tracebacks = 0
        self.warnings = 0
        self.errors = 0
        self.last_traceback: list[str] = []

    def count(self, line: str, tail: list[str]) -> None:
        if "Traceback" in line:
            self.tracebacks += 1
            self.last_traceback = list(tail)
        if '"level": "warning"' in line:
            self.warnings += 1
        elif '"level": "error"' in line:
            self.errors += 1


class BenchServer:
    """A running ``kcoord serve``; ``bootstrap`` is the address it bound."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        bootstrap: str,
        data_dir: Path,
        settings: dict[str, str],
        events: WatchedEvents,
        spawned_at: float,
        tally: LogTally,
    ) -> None:
        self.proc = proc
        self.bootstrap = bootstrap
        self.data_dir = data_dir
        self.settings = settings
        self.events = events
        self.spawned_at = spawned_at
        """``time.monotonic()`` when the process was started."""
        self.tally = tally

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        """SIGTERM and wait for a clean shutdown (killed after 15 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _wait_for_start(
    proc: subprocess.Popen[bytes], tail: list[str], events: WatchedEvents, tally: LogTally
) -> str | None:
    """Read the log until ``kcoord.started``; keep reading in a thread afterwards (for watched events)."""
    assert proc.stderr is not None
    found: list[str] = []
    started = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            tail[:] = [*tail[-40:], line]
            tally.count(line, tail)
            if started.is_set() and not events.names:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            events.saw(event)
            if not started.is_set() and event.get("event") == "kcoord.started":
                found.append(str(event["listen"]))
                started.set()
        started.set()

    threading.Thread(target=read, daemon=True).start()
    started.wait(START_TIMEOUT_S)
    return found[0] if found else None


@contextmanager
def running_kcoord(
    settings: dict[str, str],
    *,
    data_dir: Path | None = None,
    watch: Iterable[str] = (),
    listen: str = "127.0.0.1:0",
    preexec_fn: Callable[[], None] | None = None,
    python: str | None = None,
) -> Iterator[BenchServer]:
    """A kcoord subprocess with its own temporary data directory (or ``data_dir``), stopped on exit.

    ``watch``: names of log events to keep (see :meth:`BenchServer.events`); ``preexec_fn`` runs in
    the child before kcoord starts (resource limits); ``python``: the interpreter to run kcoord with
    (another ref's virtualenv, see ``refs.py``), this one by default.
    """
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-") as tmp:
        data_dir = data_dir or Path(tmp) / "data"
        command = [
            python or sys.executable,
            "-m",
            "kcoord",
            "serve",
            "--listen",
            listen,
            "--data-dir",
            str(data_dir),
        ]
        command += ["--metrics-listen", "127.0.0.1:0"]
        for name, value in settings.items():
            command += ["--set", f"{name}={value}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
        spawned_at = time.monotonic()
        proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, preexec_fn=preexec_fn
        )
        tail: list[str] = []
        events = WatchedEvents(watch)
        server = None
        try:
            tally = LogTally()
            listen = _wait_for_start(proc, tail, events, tally)
            if listen is None:
                raise RuntimeError("kcoord did not start:\n" + "\n".join(tail))
            server = BenchServer(proc, listen, data_dir, settings, events, spawned_at, tally)
            yield server
        finally:
            if server is not None:
                server.stop()
            elif proc.poll() is None:
                proc.kill()
                proc.wait(5)
