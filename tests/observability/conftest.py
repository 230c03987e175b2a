"""Fixtures for the observability tests: a server at debug level, as the live groups form through
:func:`tests.observability.live_group.form`, which reads its ``group.sync_answered`` lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka_python_stall import DEBUG_LOG
from tests.support.server import KcoordProcess


@pytest.fixture
def kcoord(tmp_path: Path) -> Iterator[KcoordProcess]:
    """A fresh kcoord at debug level on a free loopback port with its own data directory."""
    server = KcoordProcess(tmp_path / "data", DEBUG_LOG).start()
    try:
        yield server
    finally:
        server.kill()
