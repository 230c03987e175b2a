"""The suite under pytest-xdist: heaviest files first, and the workers' session summaries gathered.

scripts/test.sh runs the suite on two workers with ``--dist loadfile --no-loadscope-reorder``: each
test file runs whole on one worker, in its own order, so module-scoped servers are started once and
no test meets another file's state half-way. Every worker collects the same items and orders the
files by their weight (the markers of their tests, a rough count of seconds), heaviest first; the
scheduler hands out files in that order. The long real-client scenarios start first, and the short
files at the end even out the two workers' finishing times.

What the session summary shows (kafka-python stall retries, commit retries, server log warnings) is
kept in each worker's globals; a worker sends its own at the end, and the controller adds them up.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.support import group_clients, kafka_python_stall, server_logs

#: A rough figure of a test's seconds by its heaviest marker; only the order it gives matters.
MARKER_WEIGHTS = {"container": 60.0, "slow": 30.0, "browser": 10.0, "stress": 10.0, "clients": 5.0}
#: The weight of a test with none of those markers (most take milliseconds).
UNMARKED_WEIGHT = 0.2
_SUMMARY_KEY = "kcoord_summary"


def is_worker(config: pytest.Config) -> bool:
    """True inside an xdist worker process."""
    return hasattr(config, "workerinput")


def weight_of(item: pytest.Item) -> float:
    weights = [MARKER_WEIGHTS[mark.name] for mark in item.iter_markers() if mark.name in MARKER_WEIGHTS]
    return max(weights, default=UNMARKED_WEIGHT)


def heaviest_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with each file's tests kept together and in order, the files by falling weight
    (ties in collection order)."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ordered = sorted(files.values(), key=lambda tests: -sum(weight_of(t) for t in tests))
    return [item for tests in ordered for item in tests]


def send_summary(config: pytest.Config) -> None:
    """In a worker: hand this worker's summary figures to the controller."""
    output: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if output is None:
        return
    output[_SUMMARY_KEY] = {
        "formed": list(kafka_python_stall.FORMED),
        "retries": list(kafka_python_stall.RETRIES),
        "commit_retries": list(group_clients.COMMIT_RETRIES),
        "warnings": dict(server_logs.REGISTRY.warnings),
    }


def receive_summary(node: object) -> None:
    """In the controller: add a finished worker's summary figures to this process's."""
    output: dict[str, Any] = getattr(node, "workeroutput", None) or {}
    summary = output.get(_SUMMARY_KEY)
    if not summary:
        return
    kafka_python_stall.FORMED.extend(summary["formed"])
    kafka_python_stall.RETRIES.extend(summary["retries"])
    group_clients.COMMIT_RETRIES.extend(summary["commit_retries"])
    server_logs.REGISTRY.warnings.update(Counter(summary["warnings"]))
