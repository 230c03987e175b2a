"""Runs a real kcoord server as a subprocess for tests: real sockets, real files, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.support.server_logs import LogSource, register

DEFAULT_TEST_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


class KcoordProcess:
    """One ``kcoord serve`` subprocess bound to a free loopback port; its JSON log lines are kept."""

    def __init__(
        self,
        data_dir: Path,
        settings: dict[str, str] | None = None,
        *,
        port: int = 0,
        extra_args: Iterable[str] = (),
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        """``preexec_fn`` runs in the child before kcoord starts (resource limits, say)."""
        self.data_dir = data_dir
        self.preexec_fn = preexec_fn
        self.settings = {**DEFAULT_TEST_SETTINGS, **(settings or {})}
        self.port = port
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.logs: list[dict[str, Any]] = []
        self.raw_log: list[str] = []
        self.host = "127.0.0.1"
        self._started = threading.Event()
        self._reader: threading.Thread | None = None
        self.log_source = LogSource(
            f"kcoord {data_dir.parent.name}/{data_dir.name}",
            self.raw_log,
            finished=lambda: self.proc is None or self.proc.poll() is not None,
            settle=self._join_reader,
        )

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "kcoord",
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--data-dir",
            str(self.data_dir),
            "--metrics-listen",
            "127.0.0.1:0",
        ]
        for name, value in self.settings.items():
            cmd += ["--set", f"{name}={value}"]
        return cmd + self.extra_args

    def start(self, timeout: float = 30.0) -> KcoordProcess:
        self._started.clear()
        env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
        self.proc = subprocess.Popen(
            self.command(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=self.preexec_fn,
        )
        self._reader = threading.Thread(target=self._read_logs, args=(self.proc,), daemon=True)
        self._reader.start()
        register(self.log_source)
        if not self._started.wait(timeout):
            self.kill()
            raise RuntimeError("kcoord did not start:\n" + "\n".join(self.raw_log[-30:]))
        return self

    def _read_logs(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.raw_log.append(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            self.logs.append(event)
            if event.get("event") == "kcoord.started":
                _, _, port = str(event["listen"]).rpartition(":")
                self.port = int(port)
                self.metrics_address = event.get("metrics")
                self._started.set()

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.logs if e.get("event") == name]

    def wait_for_event(self, name: str, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.events(name)
            if found:
                return found[-1]
            time.sleep(0.02)
        raise AssertionError(f"no {name!r} log line within {timeout}s")

    def kill(self) -> None:
        """SIGKILL: no flush, no goodbye; what was acknowledged must survive."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self._join_reader()
        return code

    def _join_reader(self) -> None:
        """Wait (briefly) until every line the exited process wrote has been read."""
        if self._reader:
            self._reader.join(5)

    def restart(self) -> KcoordProcess:
        """Start again on the same data directory and the same port (clients keep their bootstrap)."""
        self.kill()
        return self.start()
