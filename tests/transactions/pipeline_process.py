"""A pipeline run as its own process, SIGKILLed and restarted by a test: the line protocol between the
two, and the test's side that starts it, follows its progress and kills it.

The pipeline prints ``committed N`` each time its group's committed input offsets reach a new total N,
``recovered <error>`` for each client error its loop recovered from, and ``done <summary>`` when it has
copied everything. The test learns the progress from these lines rather than by asking kcoord for the
group's offsets: the pipeline copies tens of thousands of records a second, and a probe that asks
kcoord is blind exactly while kcoord restarts, long enough for the copy to run past the point of the
next kill (this is how the 30,000-record run once saw its pipeline finish before the last kill).

Kill points: the pipeline is given input totals (``HOLD_AT``, comma-separated). In the first
transaction that starts at or past each, once that transaction's output records are flushed to the
log and before it is committed, it prints ``open N`` and waits for a line on its stdin. So every kill
the test makes there lands inside an open transaction whose records are written: a killed pipeline
leaves it to be aborted by its successor's InitProducerId, and a killed kcoord must find it in its log
and let the pipeline commit it (or abort it) after the restart.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROGRESS, RECOVERED, OPEN, DONE = "committed", "recovered", "open", "done"


READ_COMMITTED_CONSUMER: dict[str, Any] = {
    "isolation_level": "read_committed",
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
    "session_timeout_ms": 6000,
}
"""The input consumer of the Python-client pipelines (kafka-python and aiokafka take the same names):
only committed input, offsets committed inside the transaction, from the start."""


def report_progress(committed: int) -> None:
    print(f"{PROGRESS} {committed}", flush=True)


def report_recovered(error: str) -> None:
    print(f"{RECOVERED} {error}", flush=True)


def hold_open_transaction(committed: int) -> None:
    """Say that a transaction's records are in the log, not committed; wait for the test to go on."""
    print(f"{OPEN} {committed}", flush=True)
    sys.stdin.readline()


def hold_points(argv: list[str]) -> list[int]:
    """The optional ``HOLD_AT`` argument: input totals, comma-separated."""
    return [int(point) for point in argv[0].split(",") if point] if argv else []


def report_done(summary: Any) -> None:
    print(f"{DONE} {summary}", flush=True)


@dataclass
class PipelineRun:
    """What one pipeline did; the errors it recovered from also go to ``on_error`` as they happen."""

    transactions: int = 0
    aborted: int = 0
    producers: int = 0
    errors: list[str] = field(default_factory=list)
    on_error: Callable[[str], None] = field(default=lambda error: None, repr=False)

    def note(self, error: str) -> None:
        self.errors.append(error)
        self.on_error(error)


class PipelineProcess:
    """``python -m <module> BOOTSTRAP SOURCE SINK GROUP TXN_ID PARTITIONS TOTAL [HOLD_AT]``, its output
    followed by a reader thread; its stderr goes to ``stderr_path``."""

    def __init__(self, module: str, args: list[str], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self.committed = 0
        self.recovered: list[str] = []
        self.holding: int | None = None
        """The committed total at which the pipeline holds an open transaction, waiting for us."""
        self.summary: str | None = None
        self._changed = threading.Condition()
        with stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", module, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        self._reader = threading.Thread(target=self._follow, daemon=True)
        self._reader.start()

    def _follow(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            word, _, rest = line.strip().partition(" ")
            with self._changed:
                if word == PROGRESS:
                    self.committed = max(self.committed, int(rest))
                elif word == RECOVERED:
                    self.recovered.append(rest)
                elif word == OPEN:
                    self.holding = int(rest)
                elif word == DONE:
                    self.summary = rest
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_committed(self, count: int, within_s: float) -> int:
        """Block until the pipeline reports ``count`` committed records; its total then. Fails if it
        ends first or takes longer than ``within_s``."""
        deadline = time.monotonic() + within_s
        with self._changed:
            while self.committed < count:
                ended = self.summary is not None or not self._reader.is_alive()
                assert not ended, f"the pipeline ended at {self.committed} < {count}: {self.failure()}"
                left = deadline - time.monotonic()
                assert left > 0, f"{self.committed} < {count} records committed in {within_s} s"
                self._changed.wait(min(left, 1.0))
            return self.committed

    def wait_open(self, within_s: float) -> int:
        """Block until the pipeline holds an open transaction (see the module docstring); the committed
        total before it. Fails if the pipeline ends first or takes longer than ``within_s``."""
        deadline = time.monotonic() + within_s
        with self._changed:
            while self.holding is None:
                ended = self.summary is not None or not self._reader.is_alive()
                assert not ended, f"the pipeline ended at {self.committed} without holding: {self.failure()}"
                left = deadline - time.monotonic()
                assert left > 0, f"no open transaction held in {within_s} s (at {self.committed})"
                self._changed.wait(min(left, 1.0))
            return self.holding

    def release(self) -> None:
        """Let the held transaction go on to its commit."""
        assert self.proc.stdin is not None
        with self._changed:
            self.holding = None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, within_s: float) -> str:
        """Wait for the pipeline to exit; its summary (fails unless it exited 0 and said ``done``)."""
        code = self.proc.wait(within_s)
        self._reader.join(10)
        assert code == 0 and self.summary is not None, self.failure()
        return self.summary

    def failure(self) -> str:
        """What to show when the pipeline misbehaved: exit code and the end of its stderr."""
        return f"exit {self.proc.poll()}, stderr: {self.stderr_path.read_text(errors='replace')[-3000:]}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)
