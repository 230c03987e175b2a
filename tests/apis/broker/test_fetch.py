"""Fetch handler: reads, size limits (KIP-74), errors and the long poll."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from kcoord.apis.broker.fetch import fetch_error, handle_fetch
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import batch_leader_epoch
from kcoord.storage import PartitionLog
from tests.support.served import served_spec

from .data_path_helpers import DataPathApp, context, make_app, make_batch, on_the_wire, request


@pytest.fixture
async def app(tmp_path: Path) -> DataPathApp:
    app = await make_app(tmp_path / "data")
    await app.topics.create("t", 2)
    return app


def log_of(app: DataPathApp, partition: int) -> PartitionLog:
    found = app.topics.partition_log("t", partition)
    assert found is not None
    return found


def fetch_body(
    *parts: tuple[str, int, int],
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50_000_000,
    partition_max_bytes: int = 1_000_000,
    replica_id: int = -1,
) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append(
            {"partition": partition, "fetch_offset": offset, "partition_max_bytes": partition_max_bytes}
        )
    return {
        "replica_id": replica_id,
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "topics": [{"topic": name, "partitions": data} for name, data in topics.items()],
        "forgotten_topics_data": [],
    }


async def fetch(
    app: DataPathApp, *parts: tuple[str, int, int], version: int = 12, **kw: Any
) -> dict[str, Any]:
    ctx = context(ApiKey.FETCH, version)
    req = request(ApiKey.FETCH, version, fetch_body(*parts, **kw))
    result: dict[str, Any] = await handle_fetch(
        ctx, req, topics=app.topics, hints=app.growth_hints, authorizer=app.authorizer
    )
    return result


def answers(response: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(t["topic"], p["partition_index"]): p for t in response["responses"] for p in t["partitions"]}


async def test_returns_stored_batches_and_offsets(app: DataPathApp) -> None:
    """Records come back as stored, with high watermark, last stable and log start offsets."""
    await log_of(app, 0).append(make_batch([b"a", b"b"]))
    await log_of(app, 0).append(make_batch([b"c"]))
    response = await fetch(app, ("t", 0, 1), ("t", 1, 0))
    part = answers(response)[("t", 0)]
    assert response["session_id"] == 0
    assert part["error_code"] == ErrorCode.none
    assert part["high_watermark"] == part["last_stable_offset"] == 3
    assert part["log_start_offset"] == 0
    assert part["preferred_read_replica"] == -1
    assert part["aborted_transactions"] == []
    assert part["records"] == log_of(app, 0).read(0, 10_000)
    assert answers(response)[("t", 1)]["records"] == b""


async def test_unknown_partition_and_out_of_range(app: DataPathApp) -> None:
    """Unknown partitions and offsets past the log end are answered per partition, at once."""
    response = await fetch(app, ("nope", 0, 0), ("t", 0, 5), max_wait_ms=5000)
    assert answers(response)[("nope", 0)]["error_code"] == ErrorCode.unknown_topic_or_partition
    assert answers(response)[("t", 0)]["error_code"] == ErrorCode.offset_out_of_range


async def test_partition_max_bytes_limits_each_partition(app: DataPathApp) -> None:
    """A partition gets only whole batches within partition_max_bytes."""
    batch = make_batch([b"x" * 100])
    for _ in range(5):
        await log_of(app, 0).append(batch)
    part = answers(await fetch(app, ("t", 0, 0), partition_max_bytes=len(batch) * 2 + 10))[("t", 0)]
    assert len(part["records"]) == 2 * len(batch)


async def test_first_partition_with_data_gets_one_oversized_batch(app: DataPathApp) -> None:
    """KIP-74: an oversized batch still goes to the first partition with data, not to later ones."""
    big = make_batch([b"x" * 1000])
    await log_of(app, 0).append(big)
    await log_of(app, 1).append(big)
    parts = answers(await fetch(app, ("t", 0, 0), ("t", 1, 0), max_bytes=100, partition_max_bytes=100))
    assert parts[("t", 0)]["records"] == log_of(app, 0).read(0, 10_000)
    assert parts[("t", 1)]["records"] == b""
    assert parts[("t", 1)]["error_code"] == ErrorCode.none


async def test_max_bytes_caps_the_whole_response(app: DataPathApp) -> None:
    """max_bytes is shared by all partitions in request order."""
    batch = make_batch([b"x" * 100])
    for partition in (0, 1):
        for _ in range(3):
            await log_of(app, partition).append(batch)
    parts = answers(await fetch(app, ("t", 0, 0), ("t", 1, 0), max_bytes=len(batch) * 4))
    assert len(parts[("t", 0)]["records"]) == 3 * len(batch)
    assert len(parts[("t", 1)]["records"]) == len(batch)


async def test_long_poll_wakes_on_append(app: DataPathApp) -> None:
    """A waiting fetch answers as soon as a produce lands on a fetched partition."""
    started = time.monotonic()
    waiting = asyncio.ensure_future(fetch(app, ("t", 0, 0), ("t", 1, 0), max_wait_ms=10_000))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await log_of(app, 1).append(make_batch([b"wake"]))
    response = await asyncio.wait_for(waiting, 2)
    assert time.monotonic() - started < 2
    assert answers(response)[("t", 1)]["records"] != b""


async def test_long_poll_waits_for_min_bytes(app: DataPathApp) -> None:
    """Appends below min_bytes do not end the wait; reaching min_bytes does."""
    small = make_batch([b"s"])
    waiting = asyncio.ensure_future(fetch(app, ("t", 0, 0), max_wait_ms=10_000, min_bytes=len(small) * 2))
    await asyncio.sleep(0.02)
    await log_of(app, 0).append(small)
    await asyncio.sleep(0.02)
    assert not waiting.done()
    await log_of(app, 0).append(small)
    response = await asyncio.wait_for(waiting, 2)
    assert len(answers(response)[("t", 0)]["records"]) == 2 * len(small)


async def test_long_poll_times_out_with_what_is_there(app: DataPathApp) -> None:
    """With nothing to read the fetch answers empty after about max_wait_ms."""
    started = time.monotonic()
    response = await fetch(app, ("t", 0, 0), max_wait_ms=150)
    elapsed = time.monotonic() - started
    assert 0.1 <= elapsed < 2
    assert answers(response)[("t", 0)]["records"] == b""


async def test_cancelled_fetch_unregisters_its_listeners(app: DataPathApp) -> None:
    """A fetch cancelled while waiting (connection closed) leaves no append listener behind."""
    waiting = asyncio.ensure_future(fetch(app, ("t", 0, 0), max_wait_ms=10_000))
    await asyncio.sleep(0.02)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert log_of(app, 0)._listeners == []  # type: ignore[attr-defined]


async def test_follower_fetch_is_refused(app: DataPathApp) -> None:
    """A replica fetch (replica_id >= 0) is NOT_LEADER_OR_FOLLOWER on every partition."""
    req = request(ApiKey.FETCH, 12, fetch_body(("t", 0, 0), replica_id=1))
    with pytest.raises(KafkaError) as raised:
        await handle_fetch(
            context(ApiKey.FETCH, 12),
            req,
            topics=app.topics,
            hints=app.growth_hints,
            authorizer=app.authorizer,
        )
    shaped = fetch_error(req, raised.value.code)
    assert answers(shaped)[("t", 0)]["error_code"] == ErrorCode.not_leader_or_follower


@pytest.mark.parametrize("version", [4, 5, 7, 11, 12])
async def test_every_served_version_encodes(app: DataPathApp, version: int) -> None:
    """Data and errors encode at v4-v12 with the records unchanged and session id 0 where it exists."""
    await log_of(app, 0).append(make_batch([b"a"]))
    decoded = on_the_wire(
        ApiKey.FETCH, version, await fetch(app, ("t", 0, 0), ("nope", 0, 0), version=version)
    )
    data, missing = decoded.responses[0].partitions[0], decoded.responses[1].partitions[0]
    assert data.records == log_of(app, 0).read(0, 10_000)
    assert (data.high_watermark, missing.error_code) == (1, ErrorCode.unknown_topic_or_partition)
    assert getattr(decoded, "session_id", 0) == 0


@pytest.mark.parametrize(
    ("current", "error"),
    [(-1, ErrorCode.none), (0, ErrorCode.none), (1, ErrorCode.unknown_leader_epoch)],
)
async def test_current_leader_epoch_is_checked_from_v9(
    app: DataPathApp, current: int, error: ErrorCode
) -> None:
    """v9+: the partition's current_leader_epoch must be the leader's (0 alone) or -1; a newer one is
    UNKNOWN_LEADER_EPOCH with no data; v4-v8 carry no epoch and are never refused for it."""
    await log_of(app, 0).append(make_batch([b"a"]))
    body = fetch_body(("t", 0, 0))
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = current
    ctx = context(ApiKey.FETCH, 12)
    response = await handle_fetch(
        ctx,
        request(ApiKey.FETCH, 12, body),
        topics=app.topics,
        hints=app.growth_hints,
        authorizer=app.authorizer,
    )
    answer = answers(response)[("t", 0)]
    assert answer["error_code"] == error
    assert (answer["records"] != b"") == (error == ErrorCode.none)
    old = answers(await fetch(app, ("t", 0, 0), version=8))[("t", 0)]
    assert old["error_code"] == ErrorCode.none


async def test_stored_batches_carry_the_leader_epoch(app: DataPathApp) -> None:
    """What a consumer fetches is stamped with the leader epoch it was appended under (0 alone), so
    its position carries an epoch to validate after a leader change (KIP-320)."""
    await log_of(app, 0).append(make_batch([b"a"]))
    records = answers(await fetch(app, ("t", 0, 0)))[("t", 0)]["records"]
    assert batch_leader_epoch(records) == 0


def test_advertised_versions() -> None:
    """Fetch is advertised v4-v12: record batch v2 needs v4, v13+ name topics by id."""
    spec = served_spec(ApiKey.FETCH)
    assert (spec.min_version, spec.max_version) == (4, 12)
