"""The data partitions' transaction APIs called directly: WriteTxnMarkers' checks and answers,
ListOffsets' read_committed lookups against the last stable offset, Fetch's aborted list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.apis.broker.fetch import handle_fetch
from kcoord.apis.broker.list_offsets import handle_list_offsets
from kcoord.apis.broker.write_txn_markers import handle_write_txn_markers
from kcoord.cluster.transaction_markers import DataMarkerWriter
from kcoord.coordinator.transactions import TopicPartition, TxnMarker
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.security.acl import AclOperation, ResourceType
from kcoord.security.authorizer import Authorizer

from .data_path_helpers import TRANSACTIONAL, DataPathApp, context, make_app, make_batch, on_the_wire, request

T0 = 1_700_000_000_000
PID = 77


class _NoClusterAction(Authorizer):
    """Allows everything but CLUSTER_ACTION on the cluster."""

    enabled = True

    def authorize(
        self, principal: Any, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        return not (resource_type == ResourceType.CLUSTER and operation == AclOperation.CLUSTER_ACTION)


@pytest.fixture
async def app(tmp_path: Path) -> DataPathApp:
    app = await make_app(tmp_path / "data")
    await app.topics.create("t", 1)
    return app


def writer(app: DataPathApp) -> DataMarkerWriter:
    return DataMarkerWriter(app.topics, app.producers, app.clock)


async def write_markers(
    app: DataPathApp, *targets: tuple[str, int], epoch: int = 0, committed: bool = False, version: int = 2
) -> dict[tuple[str, int], int]:
    marker = {
        "producer_id": PID,
        "producer_epoch": epoch,
        "transaction_result": committed,
        "topics": [{"name": topic, "partition_indexes": [partition]} for topic, partition in targets],
        "coordinator_epoch": 1,
    }
    ctx = context(ApiKey.WRITE_TXN_MARKERS, version)
    req = request(ApiKey.WRITE_TXN_MARKERS, version, {"markers": [marker]})
    response = await handle_write_txn_markers(ctx, req, writer=writer(app), authorizer=app.authorizer)
    decoded = on_the_wire(ApiKey.WRITE_TXN_MARKERS, version, response)
    return {
        (topic.name, int(p.partition_index)): int(p.error_code)
        for topic in decoded.markers[0].topics
        for p in topic.partitions
    }


async def append_transactional(app: DataPathApp, value: bytes, timestamp_ms: int = T0) -> int:
    partition_log = app.topics.partition_log("t", 0)
    assert partition_log is not None
    app.producers.check_and_record("t", 0, PID, 0, 0, 1)
    app.producers.begin_transaction("t", 0, PID, partition_log.log_end_offset)
    batch = make_batch(
        [value],
        timestamp_ms=timestamp_ms,
        producer_id=PID,
        producer_epoch=0,
        base_sequence=0,
        attributes=TRANSACTIONAL,
    )
    return (await partition_log.append(batch)).base_offset


@pytest.mark.parametrize("version", [1, 2])
async def test_markers_end_the_transaction_per_partition(app: DataPathApp, version: int) -> None:
    """Per partition: NONE for the one held (its LSO moves), else UNKNOWN_TOPIC_OR_PARTITION."""
    await append_transactional(app, b"a")
    assert app.producers.last_stable_offset("t", 0, 1) == 0
    answers = await write_markers(app, ("t", 0), ("t", 5), ("nope", 0), version=version)
    assert answers == {
        ("t", 0): ErrorCode.none,
        ("t", 5): ErrorCode.unknown_topic_or_partition,
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert app.producers.last_stable_offset("t", 0, 2) == 2
    assert [(a.first_offset, a.last_offset) for a in app.producers.aborted_between("t", 0, 0, 2)] == [(0, 1)]


async def test_a_stale_marker_epoch_is_refused_and_not_written(app: DataPathApp) -> None:
    """A marker older than the producer's epoch there is INVALID_PRODUCER_EPOCH; nothing is appended."""
    app.producers.check_and_record("t", 0, PID, 3, 0, 1)
    assert await write_markers(app, ("t", 0), epoch=2) == {("t", 0): ErrorCode.invalid_producer_epoch}
    assert app.topics.partition_log("t", 0).log_end_offset == 0  # type: ignore[union-attr]


async def test_write_txn_markers_needs_cluster_action(app: DataPathApp) -> None:
    """Without Cluster CLUSTER_ACTION every partition is CLUSTER_AUTHORIZATION_FAILED; nothing is written."""
    app.authorizer = _NoClusterAction()
    assert await write_markers(app, ("t", 0)) == {("t", 0): ErrorCode.cluster_authorization_failed}
    assert app.topics.partition_log("t", 0).log_end_offset == 0  # type: ignore[union-attr]


async def lookup(app: DataPathApp, timestamp: int, isolation_level: int) -> tuple[int, int]:
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
    }
    response = await handle_list_offsets(
        context(ApiKey.LIST_OFFSETS, 7),
        request(ApiKey.LIST_OFFSETS, 7, body),
        topics=app.topics,
        authorizer=app.authorizer,
        producers=app.producers,
    )
    answer = response["topics"][0]["partitions"][0]
    return answer["offset"], answer["timestamp"]


async def test_read_committed_lookups_stop_at_the_lso(app: DataPathApp) -> None:
    """Under read_committed, latest is the LSO and a lookup landing at or past it finds nothing."""
    partition_log = app.topics.partition_log("t", 0)
    assert partition_log is not None
    await partition_log.append(make_batch([b"plain"], timestamp_ms=T0))
    assert await append_transactional(app, b"open", timestamp_ms=T0 + 10) == 1
    assert await lookup(app, -1, isolation_level=1) == (1, -1)
    assert await lookup(app, -1, isolation_level=0) == (2, -1)
    assert await lookup(app, T0 + 5, isolation_level=1) == (-1, -1)
    assert await lookup(app, T0 + 5, isolation_level=0) == (1, T0 + 10)
    assert await lookup(app, T0, isolation_level=1) == (0, T0)
    assert await lookup(app, -3, isolation_level=1) == (-1, -1)
    assert await lookup(app, -2, isolation_level=1) == (0, -1)


async def fetch_committed(app: DataPathApp, max_bytes: int) -> Any:
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition": 0,
                        "fetch_offset": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    response = await handle_fetch(
        context(ApiKey.FETCH, 11),
        request(ApiKey.FETCH, 11, body),
        topics=app.topics,
        hints=app.growth_hints,
        authorizer=app.authorizer,
        producers=app.producers,
    )
    return on_the_wire(ApiKey.FETCH, 11, response).responses[0].partitions[0]


async def test_aborted_transactions_are_cut_to_the_data_returned(app: DataPathApp) -> None:
    """A read_committed answer holding only the first aborted transaction's batch lists only that one."""
    markers = writer(app)
    for pid in (PID, PID + 1):
        app.producers.check_and_record("t", 0, pid, 0, 0, 1)
        partition_log = app.topics.partition_log("t", 0)
        assert partition_log is not None
        app.producers.begin_transaction("t", 0, pid, partition_log.log_end_offset)
        batch = make_batch(
            [b"x" * 50], producer_id=pid, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL
        )
        await partition_log.append(batch)
        assert (
            await markers.write_marker(TxnMarker(TopicPartition("t", 0), pid, 0, False, "tx"), 1)
            == ErrorCode.none
        )
    whole = await fetch_committed(app, 1 << 20)
    assert [(a.producer_id, a.first_offset) for a in whole.aborted_transactions] == [(PID, 0), (PID + 1, 2)]
    first = await fetch_committed(app, 1)
    assert [(a.producer_id, a.first_offset) for a in first.aborted_transactions] == [(PID, 0)]
