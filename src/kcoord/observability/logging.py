"""structlog configuration: JSON lines by default, a readable console renderer on request.

Request context (api, correlation id, group, member) travels in structlog's contextvars, so
every line logged while serving a request carries it.

Until the server has started, log lines can be held back (:data:`START_LOG`): a start that
succeeds writes them all at once, one that fails writes them before its one ``kcoord: ...`` line
when stderr is a file, a pipe or a journal (the context is kept for whoever reads it later) and
drops them at a terminal, where the person who typed the command needs only that line. A start
still going after :data:`HOLD_S` (a database that does not answer, say) writes what it holds and
stops holding, so a slow start is never silent.

Libraries log through the standard :mod:`logging` module (asyncpg's pool, asyncio). Their records are
bridged into the same structured stream (:class:`LibraryLogBridge`): asyncpg retrying its pool floor while
PostgreSQL restarts is one warning line, not a traceback printed beside the JSON log.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import TextIO

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


HOLD_S = 5.0
"""Longest a start's log lines are held back."""
_MAX_HELD_LINES = 10_000
"""Past this many lines a start that has not finished writes what it holds and stops holding."""


class HeldLog:
    """stderr for log lines, holding them back while :attr:`holding` (see the module docstring)."""

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self._clock = clock
        self._held: list[str] = []
        self.holding = False
        self._deadline = 0.0

    def hold(self, seconds: float = HOLD_S) -> None:
        """Hold lines back from now on, for at most ``seconds``."""
        self.holding = True
        self._deadline = self._clock() + seconds

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    def write(self, text: str) -> int:
        if not self.holding:
            return self.stream.write(text)
        self._held.append(text)
        if len(self._held) > _MAX_HELD_LINES or self._clock() > self._deadline:
            self.release()
        return len(text)

    def flush(self) -> None:
        if not self.holding:
            self.stream.flush()

    def release(self) -> None:
        """Write what is held and stop holding (the server started)."""
        self.holding = False
        held, self._held = self._held, []
        self.stream.write("".join(held))
        self.stream.flush()

    def end_failed_start(self) -> None:
        """The start failed: write what is held unless stderr is a terminal, then stop holding."""
        if self.stream.isatty():
            self._held.clear()
        self.release()


START_LOG = HeldLog()


class LibraryLogBridge(logging.Handler):
    """Writes a library's :mod:`logging` record as a structured line named after its logger.

    A warning carries its exception as one ``error`` field (the library handles it and retries); an
    error keeps its traceback, since nobody handled it.
    """

    def emit(self, record: logging.LogRecord) -> None:
        fields: dict[str, object] = {"message": record.getMessage()}
        if record.exc_info is not None and record.exc_info[1] is not None:
            if record.levelno >= logging.ERROR:
                fields["exc_info"] = record.exc_info
            else:
                error = record.exc_info[1]
                fields["error"] = f"{type(error).__name__}: {error}"
        structlog.get_logger().log(record.levelno, record.name, **fields)


def _bridge_library_logs() -> None:
    root = logging.getLogger()
    if not any(isinstance(handler, LibraryLogBridge) for handler in root.handlers):
        root.addHandler(LibraryLogBridge())
    root.setLevel(logging.WARNING)


def configure_logging(fmt: str = "json", level: str = "info", *, hold_until_started: bool = False) -> None:
    """``hold_until_started``: hold the lines back in :data:`START_LOG` until the caller releases them."""
    if hold_until_started:
        START_LOG.hold()
    renderer: structlog.types.Processor
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=START_LOG),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    _bridge_library_logs()
