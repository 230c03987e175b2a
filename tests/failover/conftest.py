"""Fixtures for the failover acceptance tests: groups of default-timing members, torn down after the test.

Servers run at debug level: the groups form through
:func:`tests.support.kafka_python_stall.form_default_timing`, which reads ``group.sync_answered``."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.failover_clients import DefaultTimingGroup
from tests.support.kafka_python_stall import debug_server
from tests.support.server import KcoordProcess
from tests.support.tcp_proxy import TcpProxy

_numbers = itertools.count()

MakeGroup = Callable[..., DefaultTimingGroup]


@pytest.fixture
def kcoord(tmp_path: Path) -> Iterator[KcoordProcess]:
    """A fresh kcoord at debug level: the groups' formation reads its ``group.sync_answered`` lines."""
    with debug_server(tmp_path / "data") as server:
        yield server


@pytest.fixture
def make_group(request: pytest.FixtureRequest) -> Iterator[MakeGroup]:
    """Build a group named after the test on a given server; every member is killed afterwards."""
    made: list[DefaultTimingGroup] = []
    test = "".join(c if c.isalnum() else "-" for c in request.node.name).strip("-")[:80]

    def make(server: KcoordProcess, partitions: int, *, bootstrap: str | None = None) -> DefaultTimingGroup:
        number = next(_numbers)
        group = DefaultTimingGroup(
            server, f"{test}-{number}", f"g-{test}-{number}", partitions, bootstrap=bootstrap
        )
        made.append(group)
        return group

    try:
        yield make
    finally:
        for group in made:
            group.stop_all()


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    """A TCP proxy already listening on a loopback port; start it with the server's port."""
    tcp_proxy = TcpProxy()
    try:
        yield tcp_proxy
    finally:
        tcp_proxy.stop()
