"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import postgres_cluster
from tests.support.postgres_stores import two_nodes
from tests.support.server import KcoordProcess

__all__ = ["postgres_cluster", "two_nodes"]


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
