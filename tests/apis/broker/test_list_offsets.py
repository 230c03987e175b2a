"""ListOffsets handler: earliest, latest, max timestamp and lookups by time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.apis.broker.list_offsets import handle_list_offsets, list_offsets_error
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.storage.helpers import build_batch
from tests.support.served import served_spec

from .data_path_helpers import DataPathApp, context, make_app, make_batch, on_the_wire, request

T0 = 1_700_000_000_000


@pytest.fixture
async def app(tmp_path: Path) -> DataPathApp:
    app = await make_app(tmp_path / "data")
    await app.topics.create("t", 2)
    partition_log = app.topics.partition_log("t", 0)
    assert partition_log is not None
    for i, ts in enumerate((T0, T0 + 5000, T0 + 1000)):
        await partition_log.append(make_batch([b"%d" % i, b"x"], timestamp_ms=ts))
    return app


def body(*parts: tuple[str, int, int]) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "timestamp": ts}]} for topic, p, ts in parts
        ],
    }


async def lookup(
    app: DataPathApp, topic: str, partition: int, timestamp: int, version: int = 7
) -> dict[str, Any]:
    ctx = context(ApiKey.LIST_OFFSETS, version)
    response = await handle_list_offsets(
        ctx,
        request(ApiKey.LIST_OFFSETS, version, body((topic, partition, timestamp))),
        topics=app.topics,
        authorizer=app.authorizer,
    )
    answer: dict[str, Any] = response["topics"][0]["partitions"][0]
    return answer


async def test_latest_and_earliest(app: DataPathApp) -> None:
    """-1 answers the log end offset and -2 the log start offset, both with timestamp -1 and the
    leader epoch (0 alone)."""
    latest = await lookup(app, "t", 0, -1)
    earliest = await lookup(app, "t", 0, -2)
    assert (latest["offset"], latest["timestamp"], latest["leader_epoch"]) == (6, -1, 0)
    assert (earliest["offset"], earliest["timestamp"], earliest["leader_epoch"]) == (0, -1, 0)


async def test_current_leader_epoch_is_checked(app: DataPathApp) -> None:
    """v4+: a current_leader_epoch newer than the leader's is UNKNOWN_LEADER_EPOCH, an older one
    FENCED_LEADER_EPOCH, -1 or the leader's own is answered; found records carry their batch's epoch."""
    ctx = context(ApiKey.LIST_OFFSETS, 7)
    req_body = body(("t", 0, -1), ("t", 1, -1))
    codes = []
    for current in (-1, 0, 1, -3):
        for topic in req_body["topics"]:
            topic["partitions"][0]["current_leader_epoch"] = current
        response = await handle_list_offsets(
            ctx, request(ApiKey.LIST_OFFSETS, 7, req_body), topics=app.topics, authorizer=app.authorizer
        )
        codes.append({p["error_code"] for t in response["topics"] for p in t["partitions"]})
    assert codes == [
        {ErrorCode.none},
        {ErrorCode.none},
        {ErrorCode.unknown_leader_epoch},
        {ErrorCode.fenced_leader_epoch},
    ]
    assert (await lookup(app, "t", 0, T0 + 500))["leader_epoch"] == 0
    assert (await lookup(app, "t", 0, -3))["leader_epoch"] == 0
    assert (await lookup(app, "t", 1, -2))["leader_epoch"] == 0, "an empty log: the leader's epoch"


async def test_max_timestamp(app: DataPathApp) -> None:
    """-3 answers the first record holding the largest timestamp."""
    found = await lookup(app, "t", 0, -3)
    assert (found["offset"], found["timestamp"]) == (2, T0 + 5000)


async def test_by_timestamp(app: DataPathApp) -> None:
    """A timestamp finds the first record whose timestamp is at or after it."""
    found = await lookup(app, "t", 0, T0 + 500)
    assert (found["offset"], found["timestamp"]) == (2, T0 + 5000)
    exact = await lookup(app, "t", 0, T0, version=1)
    assert (exact["offset"], exact["timestamp"]) == (0, T0)


async def test_exact_record_inside_a_batch(tmp_path: Path) -> None:
    """Records batched together are told apart: by time and by max timestamp, the record's own offset."""
    app = await make_app(tmp_path / "data")
    await app.topics.create("seek", 1)
    partition_log = app.topics.partition_log("seek", 0)
    assert partition_log is not None
    await partition_log.append(build_batch([b"a", b"b"], timestamps=[T0, T0 + 10]))
    stamps = [T0 + 20, T0 + 30, T0 + 90, T0 + 40, T0 + 50]
    await partition_log.append(build_batch([b"c", b"d", b"e", b"f", b"g"], timestamps=stamps))
    answers = [await lookup(app, "seek", 0, ts) for ts in (T0 + 5, T0 + 25, T0 + 31, T0 + 45, T0 + 90)]
    assert [(a["offset"], a["timestamp"]) for a in answers] == [
        (1, T0 + 10),
        (3, T0 + 30),
        (4, T0 + 90),
        (4, T0 + 90),
        (4, T0 + 90),
    ]
    latest_time = await lookup(app, "seek", 0, -3)
    assert (latest_time["offset"], latest_time["timestamp"]) == (4, T0 + 90)


async def test_by_timestamp_skips_records_below_the_log_start(tmp_path: Path) -> None:
    """A record before the log start is never the answer, even when its batch holds the time."""
    app = await make_app(tmp_path / "data")
    await app.topics.create("cut", 1)
    partition_log = app.topics.partition_log("cut", 0)
    assert partition_log is not None
    await partition_log.append(build_batch([b"a", b"b", b"c"], timestamps=[T0, T0 + 10, T0 + 20]))
    await partition_log.append(build_batch([b"d"], timestamps=[T0 + 30]))
    await partition_log.delete_records_before(2)
    answers = [await lookup(app, "cut", 0, ts) for ts in (T0, T0 + 25, -2)]
    assert [(a["offset"], a["timestamp"]) for a in answers] == [(2, T0 + 20), (3, T0 + 30), (2, -1)]


async def test_not_found_and_empty(app: DataPathApp) -> None:
    """A timestamp after every batch, or any lookup on an empty log, answers offset -1 timestamp -1."""
    late = await lookup(app, "t", 0, T0 + 10_000)
    empty_max = await lookup(app, "t", 1, -3)
    empty_latest = await lookup(app, "t", 1, -1)
    assert (late["offset"], late["timestamp"], late["error_code"]) == (-1, -1, ErrorCode.none)
    assert (empty_max["offset"], empty_max["timestamp"]) == (-1, -1)
    assert empty_latest["offset"] == 0


async def test_unknown_topic(app: DataPathApp) -> None:
    """Unknown topics and partitions answer UNKNOWN_TOPIC_OR_PARTITION per partition."""
    assert (await lookup(app, "nope", 0, -1))["error_code"] == ErrorCode.unknown_topic_or_partition
    assert (await lookup(app, "t", 9, -1))["error_code"] == ErrorCode.unknown_topic_or_partition


def test_error_response_covers_every_partition() -> None:
    """The whole-request error form repeats the code on each requested partition."""
    req = request(ApiKey.LIST_OFFSETS, 7, body(("a", 0, -1), ("b", 3, -2)))
    shaped = list_offsets_error(req, ErrorCode.unknown_server_error)
    codes = [p["error_code"] for t in shaped["topics"] for p in t["partitions"]]
    assert codes == [ErrorCode.unknown_server_error] * 2


@pytest.mark.parametrize("version", [1, 2, 4, 6, 7])
async def test_every_served_version_encodes(app: DataPathApp, version: int) -> None:
    """Answers encode at v1-v7, with leader_epoch 0 from v4."""
    ctx = context(ApiKey.LIST_OFFSETS, version)
    req = request(ApiKey.LIST_OFFSETS, version, body(("t", 0, -1)))
    response = await handle_list_offsets(ctx, req, topics=app.topics, authorizer=app.authorizer)
    answer = on_the_wire(ApiKey.LIST_OFFSETS, version, response).topics[0].partitions[0]
    assert (answer.offset, answer.timestamp) == (6, -1)
    assert getattr(answer, "leader_epoch", 0) == 0


def test_advertised_versions() -> None:
    """ListOffsets is advertised v1-v7 (v7 brings MAX_TIMESTAMP)."""
    spec = served_spec(ApiKey.LIST_OFFSETS)
    assert (spec.min_version, spec.max_version) == (1, 7)
