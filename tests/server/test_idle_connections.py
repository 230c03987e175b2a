"""connections.max.idle.ms: idle connections are closed, busy or waiting ones are not."""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess


def test_idle_connection_is_closed_and_logged(tmp_path: Path) -> None:
    """A connection with nothing to do for longer than connections.max.idle.ms is closed with a log line."""
    server = KcoordProcess(tmp_path / "data", {"connections.max.idle.ms": "1000"}).start()
    try:
        idle = RawClient(server.host, server.port)
        busy = RawClient(server.host, server.port)
        assert idle.call(18, 0, {}).error_code == 0
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert busy.call(18, 0, {}).error_code == 0
            time.sleep(0.2)
        assert idle.is_closed_by_server(timeout=3)
        assert busy.call(18, 0, {}).error_code == 0
        server.wait_for_event("connection.idle_closed")
    finally:
        server.kill()
