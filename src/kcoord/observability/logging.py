"""structlog configuration: JSON lines by default, a readable console renderer on request.

Request context (api, correlation id, group, member) travels in structlog's contextvars, so
every line logged while serving a request carries it.

Until the server has started, log lines can be held back (:data:`START_LOG`): a start that
succeeds writes them all at once, one that fails writes them before its one ``kcoord: ...`` line
when stderr is a file, a pipe or a journal (the context is kept for whoever reads it later) and
drops them at a terminal, where the person who typed the command needs only that line.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


_MAX_HELD_LINES = 10_000
"""Past this many lines a start that has not finished writes what it holds and stops holding."""


class HeldLog:
    """stderr for log lines, holding them back while :attr:`holding` (see the module docstring)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._held: list[str] = []
        self.holding = False

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    def write(self, text: str) -> int:
        if not self.holding:
            return self.stream.write(text)
        self._held.append(text)
        if len(self._held) > _MAX_HELD_LINES:
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


def configure_logging(fmt: str = "json", level: str = "info", *, hold_until_started: bool = False) -> None:
    """``hold_until_started``: hold the lines back in :data:`START_LOG` until the caller releases them."""
    START_LOG.holding = hold_until_started
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
