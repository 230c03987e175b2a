"""Library log records (asyncpg's pool, asyncio) come out as structured lines, not raw tracebacks."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from kcoord.observability import logging as kcoord_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """configure_logging changes the process's structlog and root logger: put both back."""
    structlog_config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**structlog_config)
    root.handlers[:] = handlers
    root.setLevel(level)


def _configure_into(stream: io.StringIO) -> None:
    kcoord_logging.configure_logging("json", "info")
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=stream))


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line]


def test_a_library_warning_with_an_exception_is_one_structured_line() -> None:
    stream = io.StringIO()
    _configure_into(stream)
    try:
        raise ConnectionResetError(104, "Connection reset by peer")
    except ConnectionResetError:
        pool_log = logging.getLogger("asyncpg.pool")
        pool_log.warning("Failed to restore the pool connection floor; retrying", exc_info=True)
    (line,) = _lines(stream)
    assert line["event"] == "asyncpg.pool"
    assert line["level"] == "warning"
    assert line["message"] == "Failed to restore the pool connection floor; retrying"
    assert line["error"] == "ConnectionResetError: [Errno 104] Connection reset by peer"
    assert "Traceback" not in stream.getvalue()


def test_a_library_error_keeps_its_traceback() -> None:
    stream = io.StringIO()
    _configure_into(stream)
    try:
        raise ValueError("nobody handled this")
    except ValueError:
        logging.getLogger("asyncio").error("Task exception was never retrieved", exc_info=True)
    (line,) = _lines(stream)
    assert (line["event"], line["level"]) == ("asyncio", "error")
    assert "ValueError: nobody handled this" in str(line["exception"])


def test_configuring_twice_bridges_once() -> None:
    kcoord_logging.configure_logging("json", "info")
    kcoord_logging.configure_logging("json", "info")
    bridges = [h for h in logging.getLogger().handlers if isinstance(h, kcoord_logging.LibraryLogBridge)]
    assert len(bridges) == 1


def test_library_debug_and_info_lines_stay_out() -> None:
    stream = io.StringIO()
    _configure_into(stream)
    logging.getLogger("asyncio").info("chatter")
    logging.getLogger("asyncio").debug("more chatter")
    assert _lines(stream) == []
