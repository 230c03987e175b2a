"""Fixtures for the observability tests: a server at debug level, as the live groups form through
:func:`tests.observability.live_group.form`, which reads its ``group.sync_answered`` lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka_python_stall import debug_server
from tests.support.server import KcoordProcess


@pytest.fixture
def kcoord(tmp_path: Path) -> Iterator[KcoordProcess]:
    """A fresh kcoord at debug level on a free loopback port with its own data directory."""
    with debug_server(tmp_path / "data") as server:
        yield server
