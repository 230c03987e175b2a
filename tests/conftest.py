"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import client_errors, group_clients, kafka_python_stall, parallel, server_logs
from tests.support.postgres import postgres_cluster
from tests.support.postgres_stores import two_nodes
from tests.support.server import KcoordProcess

__all__ = ["postgres_cluster", "two_nodes"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "server_log_allows(*events): server log events (fnmatch patterns; 'traceback:<class>' for a raw one) "
        "this test provokes at error level on purpose; any other error line or traceback fails it",
    )
    config.addinivalue_line(
        "markers",
        "client_errors_allow(*codes): Kafka error codes (numbers or names) the test's group members may "
        "report outside a fault window, beyond the group protocol's own (MEMBER_ID_REQUIRED, "
        "REBALANCE_IN_PROGRESS)",
    )
    server_logs.install_in_process_capture()


@pytest.fixture(autouse=True)
def server_log_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the test, every kcoord it started or used must have logged no undeclared error or
    traceback, and its group members must have reported no client error it does not allow."""
    yield
    failures = []
    patterns = server_logs.declared(request.node)
    problems = server_logs.judge(patterns)
    if problems:
        failures.append(server_logs.report(problems, patterns))
    allowed = [code for mark in request.node.iter_markers("client_errors_allow") for code in mark.args]
    errors = client_errors.unexpected_group_errors(allowed)
    if errors:
        failures.append(
            f"{len(errors)} client error(s) the test does not allow (declare with "
            "@pytest.mark.client_errors_allow or Group.fault_window):\n" + "\n".join(errors[:40])
        )
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (scripts/test.sh), every worker orders the files heaviest first (see
    tests/support/parallel.py); a serial run keeps pytest's order."""
    if parallel.is_worker(config):
        items[:] = parallel.heaviest_files_first(items)


def pytest_sessionfinish(session: pytest.Session) -> None:
    parallel.send_summary(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """An xdist worker finished: its stall retries and server log warnings join the summary."""
    parallel.receive_summary(node)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if kafka_python_stall.FORMED:
        retries = kafka_python_stall.RETRIES
        terminalreporter.write_line(
            f"kafka-python stall retries: {len(retries)} member(s) replaced"
            f" in {len(kafka_python_stall.FORMED)} group(s) formed"
        )
        for line in retries:
            terminalreporter.write_line(f"  {line}")
    if group_clients.COMMIT_RETRIES:
        terminalreporter.write_line("commits retried after a refusal for a rebalance:")
        for line in group_clients.COMMIT_RETRIES:
            terminalreporter.write_line(f"  {line}")
    warnings = server_logs.REGISTRY.warnings.most_common(5)
    if warnings:
        shown = ", ".join(f"{name} x{count}" for name, count in warnings)
        terminalreporter.write_line(f"server log warnings (most common): {shown}")


@pytest.fixture
def kcoord(tmp_path: Path) -> Iterator[KcoordProcess]:
    """A fresh kcoord subprocess on a free loopback port with its own data directory."""
    server = KcoordProcess(tmp_path / "data").start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def kcoord_factory(tmp_path: Path) -> Iterator[type[KcoordProcess]]:
    """Start servers with custom settings; every one started is killed at the end."""
    started: list[KcoordProcess] = []

    class Factory(KcoordProcess):
        def start(self, timeout: float = 30.0) -> KcoordProcess:
            started.append(self)
            return super().start(timeout)

    try:
        yield Factory
    finally:
        for server in started:
            server.kill()
