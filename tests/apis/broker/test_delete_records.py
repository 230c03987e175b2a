"""DeleteRecords handler: moving log starts, and Kafka's errors per partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.apis.broker.delete_records import delete_records_error_response, handle_delete_records
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.served import served_spec

from .data_path_helpers import DataPathApp, context, make_app, make_batch, on_the_wire, request


@pytest.fixture
async def app(tmp_path: Path) -> DataPathApp:
    app = await make_app(tmp_path / "data")
    await app.topics.create("t", 2)
    await app.topics.create("compacted", 1, configs={"cleanup.policy": "compact"})
    partition_log = app.topics.partition_log("t", 0)
    assert partition_log is not None
    for i in range(5):
        await partition_log.append(make_batch([b"%d" % i, b"x"]))
    return app


def body(*parts: tuple[str, int, int]) -> dict[str, Any]:
    return {
        "topics": [{"name": t, "partitions": [{"partition_index": p, "offset": o}]} for t, p, o in parts],
        "timeout": 1000,
    }


async def delete(app: DataPathApp, *parts: tuple[str, int, int], version: int = 2) -> list[tuple[int, int]]:
    """(error code, low watermark) per requested partition, as decoded from the wire."""
    req = request(ApiKey.DELETE_RECORDS, version, body(*parts))
    response = await handle_delete_records(
        context(ApiKey.DELETE_RECORDS, version), req, topics=app.topics, authorizer=app.authorizer
    )
    decoded = on_the_wire(ApiKey.DELETE_RECORDS, version, response)
    return [(p.error_code, p.low_watermark) for t in decoded.topics for p in t.partitions]


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_moves_the_log_start(app: DataPathApp, version: int) -> None:
    """An offset inside the log becomes its start; a lower one later keeps the start where it is."""
    assert await delete(app, ("t", 0, 3), version=version) == [(ErrorCode.none, 3)]
    assert await delete(app, ("t", 0, 1), version=version) == [(ErrorCode.none, 3)]
    partition_log = app.topics.partition_log("t", 0)
    assert partition_log is not None and partition_log.log_start_offset == 3


async def test_minus_one_means_the_high_watermark(app: DataPathApp) -> None:
    """-1 deletes everything up to the high watermark."""
    assert await delete(app, ("t", 0, -1), ("t", 1, -1)) == [(ErrorCode.none, 10), (ErrorCode.none, 0)]


async def test_errors_per_partition(app: DataPathApp) -> None:
    """Past the end or negative => OFFSET_OUT_OF_RANGE; unknown => UNKNOWN_TOPIC_OR_PARTITION;
    a compact-only topic => POLICY_VIOLATION; the internal offsets topic => INVALID_TOPIC_EXCEPTION."""
    await app.topics.ensure_offsets_topic(1)
    answers = await delete(
        app,
        ("t", 0, 11),
        ("t", 0, -5),
        ("nope", 0, 0),
        ("t", 7, 0),
        ("compacted", 0, 0),
        ("__consumer_offsets", 0, 0),
    )
    assert [code for code, _ in answers] == [
        ErrorCode.offset_out_of_range,
        ErrorCode.offset_out_of_range,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.policy_violation,
        ErrorCode.invalid_topic_exception,
    ]
    assert all(low == -1 for _, low in answers)


def test_error_response_covers_every_partition() -> None:
    """The whole-request error form repeats the code on each requested partition."""
    req = request(ApiKey.DELETE_RECORDS, 2, body(("a", 0, 1), ("b", 3, 2)))
    shaped = delete_records_error_response(req, ErrorCode.unknown_server_error)
    assert [p["error_code"] for t in shaped["topics"] for p in t["partitions"]] == [
        ErrorCode.unknown_server_error
    ] * 2


def test_advertised_versions() -> None:
    """DeleteRecords is advertised v0-v2, what librdkafka, kafka-python and Kafka's tool send."""
    spec = served_spec(ApiKey.DELETE_RECORDS)
    assert (spec.min_version, spec.max_version) == (0, 2)
