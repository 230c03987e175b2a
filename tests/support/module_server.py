"""Fixtures for test modules that share one kcoord server; import them into a package's conftest.py."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.support.server import KcoordProcess

_topic_numbers = itertools.count()


@pytest.fixture(scope="module")
def shared_kcoord(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KcoordProcess]:
    """A kcoord subprocess shared by every test of one module (starting one per test is too slow)."""
    server = KcoordProcess(tmp_path_factory.mktemp("kcoord") / "data").start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A legal topic name unique within the session, readable in the server's logs."""
    test = "".join(c if c.isalnum() else "-" for c in request.node.name).strip("-")
    return f"{test[:120]}-{next(_topic_numbers)}"
