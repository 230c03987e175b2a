"""The frames that killed or wedged kcoord, sent to a real server: each offender is disconnected with one
log line, the server stays up without a traceback, and a bystander connected throughout keeps working."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.hostile_frames import ALL, HostileFrame, request_frame
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess
from tests.support.watch import Bystander, LogWatch

JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 11, 12, 14


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


def _join(client: RawClient, group: str, member_id: str = "", instance: str | None = None) -> Any:
    return client.call(
        JOIN_GROUP,
        5,
        {
            "group_id": group,
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": member_id,
            "group_instance_id": instance,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )


def test_ids_too_long_for_the_records_are_refused_and_the_group_is_undisturbed(
    shared_kcoord: KcoordProcess, topic_name: str
) -> None:
    """A JoinGroup whose instance id cannot fit the group's record is answered INVALID_REQUEST at once;
    the group's member keeps heartbeating; a flexible one past Kafka's string limit is disconnected."""
    group = f"{topic_name}-group"
    with RawClient(shared_kcoord.host, shared_kcoord.port) as member:
        first = _join(member, group)
        assert first.error_code == ErrorCode.member_id_required
        joined = _join(member, group, first.member_id)
        assert joined.error_code == ErrorCode.none
        synced = member.call(
            SYNC_GROUP,
            3,
            {
                "group_id": group,
                "generation_id": joined.generation_id,
                "member_id": joined.member_id,
                "assignments": [{"member_id": joined.member_id, "assignment": b""}],
            },
        )
        assert synced.error_code == ErrorCode.none
        logs = LogWatch(shared_kcoord)
        with RawClient(shared_kcoord.host, shared_kcoord.port) as attacker:
            refused = _join(attacker, group, instance="i" * 32_767)
            assert refused.error_code == ErrorCode.invalid_request
            attacker.send_raw(
                attacker.encode(JOIN_GROUP, 9, _flexible_join(group, "i" * 40_000), correlation_id=9)
            )
            assert attacker.is_closed_by_server()
        logs.wait_for_mention("invalid_request")
        logs.wait_for_mention("connection.closed_bad_request", "longer than 32767")
        beat = member.call(
            HEARTBEAT,
            3,
            {"group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id},
        )
        assert beat.error_code == ErrorCode.none, "the group was not disturbed"
    assert not [raw for raw in shared_kcoord.raw_log if "Traceback" in raw]


def _flexible_join(group: str, instance: str) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": "",
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
        "reason": None,
    }
