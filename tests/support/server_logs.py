"""Every kcoord a test starts is judged at teardown: a traceback or an error line fails the test.

A *source* is one server's log as it arrives: a ``kcoord serve`` subprocess's stderr (JSON lines,
plus whatever Python prints outside structlog, such as an unhandled traceback), or the structlog
events and stdlib ``logging`` records of an in-process :class:`~kcoord.app.App` while it runs.
Every starter registers its source here; the suite's autouse fixture (tests/conftest.py) judges,
after each test, every line that arrived since the previous judgement, so a server shared by a
module is judged test by test and a server's start-up lines count for the first test that uses it.

A line is a *problem* when it is at error level or above, when it carries an exception (structlog's
``exception`` field, a warning logged with ``exc_info`` included), or when it is the first line of
a traceback printed outside the JSON log. A test that provokes one on purpose declares the events it
expects with ``@pytest.mark.server_log_allows("event.name", ...)`` (``fnmatch`` patterns; a raw
traceback is the event ``traceback:<exception class>``, after its last line); every other problem
fails the test and is printed.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import structlog

#: Levels that fail a test unless declared (structlog's ``add_log_level`` names).
ERROR_LEVELS = frozenset({"error", "critical", "exception", "fatal"})
#: The event name a traceback printed outside the JSON log is judged as.
RAW_TRACEBACK = "traceback"
_TRACEBACK_START = "Traceback (most recent call last)"
_MARKER = "server_log_allows"


@dataclass(frozen=True)
class Problem:
    """One line that fails a test unless its event is declared."""

    source: str
    event: str
    text: str


@dataclass
class LogSource:
    """One server's log lines as they arrive; ``finished`` says no more will come once it is true."""

    name: str
    lines: list[str] = field(default_factory=list)
    finished: Callable[[], bool] = lambda: False
    settle: Callable[[], None] = lambda: None
    judged: int = 0

    def add_event(self, event: dict[str, Any]) -> None:
        self.lines.append(json.dumps(event, default=str))


class _Registry:
    """Every source not yet finished and judged, in start order (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: dict[int, LogSource] = {}
        self.warnings: Counter[str] = Counter()

    def register(self, source: LogSource) -> LogSource:
        with self._lock:
            self._sources[id(source)] = source
        return source

    def sources(self) -> list[LogSource]:
        with self._lock:
            return list(self._sources.values())

    def forget(self, source: LogSource) -> None:
        with self._lock:
            self._sources.pop(id(source), None)


REGISTRY = _Registry()


def register(source: LogSource) -> LogSource:
    """Judge ``source`` after every test from now on, until it is finished and fully judged."""
    return REGISTRY.register(source)


def problems_in(source: str, lines: Iterable[str]) -> Iterator[Problem]:
    """The problem lines among ``lines``; warnings are tallied on the way for the session summary.

    A traceback printed outside the JSON log is one problem with the lines that follow it, up to
    the next JSON line."""
    traceback: list[str] | None = None
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            if _TRACEBACK_START in line:
                if traceback:
                    yield _raw_traceback(source, traceback)
                traceback = [line]
            elif traceback is not None and len(traceback) < 60:
                traceback.append(line)
            continue
        if traceback:
            yield _raw_traceback(source, traceback)
            traceback = None
        name = str(event.get("event", "?"))
        level = str(event.get("level", "")).lower()
        if level in ERROR_LEVELS or event.get("exception"):
            yield Problem(source, name, line)
        elif level == "warning":
            REGISTRY.warnings[name] += 1
    if traceback:
        yield _raw_traceback(source, traceback)


def _raw_traceback(source: str, lines: list[str]) -> Problem:
    """A traceback printed outside the JSON log, named ``traceback:<exception class>`` by its last line."""
    last = next((line for line in reversed(lines) if line and not line.startswith(" ")), "")
    exception = last.split(":", 1)[0].strip() or "?"
    return Problem(source, f"{RAW_TRACEBACK}:{exception}", "\n".join(lines))


def allowed(event: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(event, pattern) for pattern in patterns)


def judge(patterns: Iterable[str]) -> list[Problem]:
    """Every problem not matching ``patterns`` in the lines that arrived since the last judgement."""
    patterns = tuple(patterns)
    found: list[Problem] = []
    for source in REGISTRY.sources():
        done = source.finished()
        if done:
            source.settle()
        lines = source.lines[source.judged :]
        source.judged += len(lines)
        found += [p for p in problems_in(source.name, lines) if not allowed(p.event, patterns)]
        if done:
            REGISTRY.forget(source)
    return found


def declared(item: Any) -> list[str]:
    """The event patterns a test item declares with ``server_log_allows`` markers."""
    return [str(event) for mark in item.iter_markers(_MARKER) for event in mark.args]


def report(problems: list[Problem], patterns: Iterable[str]) -> str:
    tally = Counter(p.event for p in problems)
    events = ", ".join(f"{name} x{count}" for name, count in tally.most_common())
    shown = [f"[{p.source}] {p.event}: {p.text[:4000]}" for p in problems[:30]]
    more = f"\n... and {len(problems) - 30} more" if len(problems) > 30 else ""
    return (
        f"{len(problems)} unexpected server log problem(s) (declared: {sorted(set(patterns)) or 'none'}; "
        f"declare expected events with @pytest.mark.server_log_allows): {events}\n" + "\n".join(shown) + more
    )


# In-process servers ---------------------------------------------------------------------------------


class _InProcessSink:
    """Feeds structlog events and stdlib ``logging`` records to every in-process source while it runs.

    Installed once per session as a structlog processor (ahead of the renderer) and a root
    ``logging`` handler; ``structlog.testing.capture_logs`` in a test replaces it for its block,
    which that test then reads itself.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._targets: list[LogSource] = []

    def __call__(self, _logger: Any, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            targets = list(self._targets)
        if targets:
            event = {"level": method, **event_dict}
            for target in targets:
                target.add_event(event)
        return event_dict

    @contextmanager
    def feeding(self, source: LogSource) -> Iterator[None]:
        with self._lock:
            self._targets.append(source)
        try:
            yield
        finally:
            with self._lock:
                self._targets.remove(source)

    def record(self, record: logging.LogRecord) -> None:
        event: dict[str, Any] = {
            "event": f"{record.name}.{record.getMessage().split(':')[0][:60]}",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            event["exception"] = logging.Formatter().formatException(record.exc_info)
        with self._lock:
            targets = list(self._targets)
        for target in targets:
            target.add_event(event)


class _RecordHandler(logging.Handler):
    def __init__(self, sink: _InProcessSink) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.record(record)


SINK = _InProcessSink()


def install_in_process_capture() -> None:
    """Route in-process structlog events and stdlib warnings through :data:`SINK` (once per session)."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            SINK,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    logging.getLogger().addHandler(_RecordHandler(SINK))


@contextmanager
def in_process(name: str) -> Iterator[LogSource]:
    """A source for an in-process server: it receives every log line while the block runs."""
    source = LogSource(name)
    register(source)
    with SINK.feeding(source):
        yield source
    source.finished = lambda: True
