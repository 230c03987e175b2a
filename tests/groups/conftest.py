"""Fixtures for the consumer-group acceptance tests: a server per test, and a group torn down after it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.group_clients import Group
from tests.support.kafka_python_stall import debug_server
from tests.support.server import KcoordProcess

_numbers = itertools.count()


@pytest.fixture
def kcoord(tmp_path: Path) -> Iterator[KcoordProcess]:
    """A fresh kcoord at debug level: the group tests read its ``group.sync_answered`` lines."""
    with debug_server(tmp_path / "data") as server:
        yield server


@pytest.fixture
def group(kcoord: KcoordProcess, request: pytest.FixtureRequest) -> Iterator[Group]:
    """An empty group and a 10-partition topic name, both named after the test; members die with it."""
    test = "".join(c if c.isalnum() else "-" for c in request.node.name).strip("-")[:80]
    number = next(_numbers)
    members = Group(kcoord, topic=f"{test}-{number}", group=f"g-{test}-{number}", partitions=10)
    try:
        yield members
    finally:
        members.stop_all()
