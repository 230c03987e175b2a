"""The frames that killed or wedged kcoord, sent to a real server: each offender is disconnected with one
log line, the server stays up without a traceback, and a bystander connected throughout keeps working."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.hostile_frames import ALL, HostileFrame, request_frame
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess
from tests.support.watch import Bystander, LogWatch


@pytest.fixture
def bystander(shared_kcoord: KcoordProcess, topic_name: str) -> Iterator[Bystander]:
    watcher = Bystander(shared_kcoord, f"{topic_name}-bystander")
    watcher.round_trip()
    try:
        yield watcher
    finally:
        watcher.close()


@pytest.mark.parametrize("frame", ALL, ids=[f.name for f in ALL])
def test_hostile_frame_closes_only_its_connection(
    shared_kcoord: KcoordProcess, bystander: Bystander, frame: HostileFrame
) -> None:
    """The offender's connection is closed with one warning naming the request; nothing else is hurt."""
    logs = LogWatch(shared_kcoord)
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        client.send_raw(request_frame(frame.api_key, frame.version, frame.body))
        assert client.is_closed_by_server(), "the offender's connection is closed"
    line = logs.wait_for_mention("connection.closed_bad_request")
    assert line["level"] == "warning"
    bystander.round_trip()
    assert shared_kcoord.proc is not None and shared_kcoord.proc.poll() is None, "the server died"
    closes = [e for e in logs.new_lines() if e.get("event") == "connection.closed_bad_request"]
    assert len(closes) == 1, closes
    assert not [raw for raw in shared_kcoord.raw_log if "Traceback" in raw]
