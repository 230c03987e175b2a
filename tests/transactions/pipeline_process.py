"""A pipeline run as its own process, SIGKILLed and restarted by a test: the line protocol between the
two, and the test's side that starts it, follows its progress and kills it.

The pipeline prints ``committed N`` each time its group's committed input offsets reach a new total N,
``recovered <error>`` for each client error its loop recovered from, and ``done <summary>`` when it has
copied everything. The test learns the progress from these lines
rather than by asking kcoord for the group's offsets: the pipeline copies tens of thousands of records
a second, and a probe that asks kcoord is blind exactly while kcoord restarts, long enough for the copy
to run past the point of the next kill (this is how the 30,000-record run once saw its pipeline finish
before the last kill).
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

PROGRESS, RECOVERED, DONE = "committed", "recovered", "done"


def report_progress(committed: int) -> None:
    print(f"{PROGRESS} {committed}", flush=True)


def report_recovered(error: str) -> None:
    print(f"{RECOVERED} {error}", flush=True)


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
    """``python -m <module> BOOTSTRAP SOURCE SINK GROUP TXN_ID PARTITIONS TOTAL``, its output followed
    by a reader thread; its stderr goes to ``stderr_path``."""

    def __init__(self, module: str, args: list[str], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self.committed = 0
        self.recovered: list[str] = []
        self.summary: str | None = None
        self._changed = threading.Condition()
        with stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", module, *args], stdout=subprocess.PIPE, stderr=stderr, text=True
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
                elif word == DONE:
                    self.summary = rest
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, count: int, within_s: float) -> int:
        """Block until the pipeline reports ``count`` committed records (its total then) or ends;
        fails if it ends without having reported them or takes longer than ``within_s``."""
        deadline = time.monotonic() + within_s
        with self._changed:
            while self.committed < count:
                ended = self.summary is not None or not self._reader.is_alive()
                assert not ended, f"the pipeline ended at {self.committed} < {count}: {self.failure()}"
                left = deadline - time.monotonic()
                assert left > 0, f"{self.committed} < {count} records committed in {within_s} s"
                self._changed.wait(min(left, 1.0))
            return self.committed

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
