"""Transactional data on a partition seen by real consumers: read_committed stops at the last stable
offset and drops aborted transactions, read_uncommitted sees everything, across a restart too.

The transaction coordinator is another helper's part (issue 17); here a small verifier stands in
for its KIP-890 check, transactional batches go in by raw Produce, and the markers are written by
the node's own :class:`~kcoord.cluster.transaction_markers.DataMarkerWriter`, as the coordinator
will write them. The consumers are confluent-kafka's (librdkafka), the reference read_committed
implementation; aiokafka and kafka-python 3 read the same log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from kcoord.app import App
from kcoord.cluster.producer_snapshots import SNAPSHOT_DIR
from kcoord.coordinator.transactions import TopicPartition as TxnPartition
from kcoord.coordinator.transactions import TxnMarker
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.control_batch import TRANSACTIONAL_ATTRIBUTE
from kcoord.protocol.errors import ErrorCode
from tests.protocol.in_process import AsyncRawClient, app_settings, connected
from tests.support.batches import build_batch
from tests.support.server_logs import in_process

pytestmark = pytest.mark.clients

TOPIC = "txn-data"
TRANSACTIONAL_ID = "txn-data-writer"
COMMITTER, ABORTER, LINGERER = 5001, 5002, 5003
T0_MS = 1_700_000_000_000
CONSUME_TIMEOUT_S = 20.0


class AnsweringVerifier:
    """A stand-in for the transaction coordinator's KIP-890 check: one fixed answer, calls recorded."""

    def __init__(self, answer: ErrorCode = ErrorCode.none) -> None:
        self.answer = answer
        self.asked: list[tuple[str, int, int, str, int]] = []

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        self.asked.append((transactional_id, producer_id, producer_epoch, topic, partition))
        return self.answer


@asynccontextmanager
async def serving(data_dir: Path, verifier: AnsweringVerifier) -> AsyncIterator[tuple[App, int]]:
    """A started in-process App whose transactional Produce asks ``verifier``."""
    with in_process(f"in-process App {data_dir.name}"):
        app = App(app_settings(data_dir), transaction_verifier=verifier)
        _, port = await app.start()
        try:
            yield app, port
        finally:
            await app.stop()


async def create_topic(client: AsyncRawClient) -> None:
    body = {
        "topics": [
            {"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        ],
        "timeout_ms": 10_000,
        "validate_only": False,
    }
    response = await client.call(ApiKey.CREATE_TOPICS, 4, body)
    assert response.topics[0].error_code == ErrorCode.none


async def produce(
    client: AsyncRawClient, values: list[bytes], producer_id: int = -1, transactional: bool = False
) -> Any:
    """One batch by Produce v9: the partition's answer."""
    records = build_batch(
        [(None, v) for v in values],
        timestamp_ms=T0_MS,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        attributes=TRANSACTIONAL_ATTRIBUTE if transactional else 0,
    )
    body = {
        "transactional_id": TRANSACTIONAL_ID if transactional else None,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}],
    }
    response = await client.call(ApiKey.PRODUCE, 9, body)
    return response.responses[0].partition_responses[0]


async def latest(client: AsyncRawClient, isolation_level: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    response = await client.call(ApiKey.LIST_OFFSETS, 5, body)
    (partition,) = response.topics[0].partitions
    assert partition.error_code == ErrorCode.none
    return int(partition.offset)


def fetch_committed_body(fetch_offset: int = 0, max_wait_ms: int = 0) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {
                        "partition": 0,
                        "fetch_offset": fetch_offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


async def fetch_committed(client: AsyncRawClient) -> Any:
    response = await client.call(ApiKey.FETCH, 11, fetch_committed_body())
    return response.responses[0].partitions[0]


def consume(port: int, isolation_level: str) -> list[bytes]:
    """Every value confluent-kafka delivers from offset 0 to the partition's end for that isolation."""
    consumer = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": f"txn-reader-{isolation_level}",
            "isolation.level": isolation_level,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                return values
            values.append(message.value())
        raise AssertionError(f"no end of partition within {CONSUME_TIMEOUT_S}s (got {values})")
    finally:
        consumer.close()


async def end_transaction(
    app: App, producer_id: int, *, committed: bool, coordinator_epoch: int
) -> ErrorCode:
    """Write the producer's (epoch 0) commit or abort marker on the topic's partition 0, as its
    transaction coordinator would."""
    marker = TxnMarker(TxnPartition(TOPIC, 0), producer_id, 0, committed, TRANSACTIONAL_ID)
    return await app.data_markers.write_marker(marker, coordinator_epoch)


async def write_mixed_log(app: App, client: AsyncRawClient) -> None:
    """Offsets 0-2 committed, 3-5 aborted, 6-7 their markers, 8 plain, 9 an open transaction."""
    assert (await produce(client, [b"a0", b"a1", b"a2"], COMMITTER, transactional=True)).base_offset == 0
    assert (await produce(client, [b"b0", b"b1", b"b2"], ABORTER, transactional=True)).base_offset == 3
    assert await end_transaction(app, COMMITTER, committed=True, coordinator_epoch=1) == ErrorCode.none
    assert await end_transaction(app, ABORTER, committed=False, coordinator_epoch=1) == ErrorCode.none
    assert (await produce(client, [b"plain"])).base_offset == 8
    assert (await produce(client, [b"c0"], LINGERER, transactional=True)).base_offset == 9


COMMITTED = [b"a0", b"a1", b"a2", b"plain"]
EVERYTHING = [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2", b"plain", b"c0"]


async def test_read_committed_hides_aborted_and_open_transactions(tmp_path: Path) -> None:
    """read_committed sees committed records up to the open transaction only; read_uncommitted sees all."""
    verifier = AnsweringVerifier()
    async with serving(tmp_path, verifier) as (app, port), connected(port) as client:
        await create_topic(client)
        await write_mixed_log(app, client)
        assert (TRANSACTIONAL_ID, COMMITTER, 0, TOPIC, 0) in verifier.asked

        assert await asyncio.to_thread(consume, port, "read_committed") == COMMITTED
        assert await asyncio.to_thread(consume, port, "read_uncommitted") == EVERYTHING

        assert await end_transaction(app, LINGERER, committed=True, coordinator_epoch=1) == ErrorCode.none
        assert await asyncio.to_thread(consume, port, "read_committed") == [*COMMITTED, b"c0"]


async def test_list_offsets_and_fetch_answer_the_lso(tmp_path: Path) -> None:
    """ListOffsets latest is the LSO under read_committed; Fetch gives the LSO and the aborted transaction."""
    async with serving(tmp_path, AnsweringVerifier()) as (app, port), connected(port) as client:
        await create_topic(client)
        await write_mixed_log(app, client)
        assert await latest(client, isolation_level=1) == 9
        assert await latest(client, isolation_level=0) == 10

        partition = await fetch_committed(client)
        assert (partition.high_watermark, partition.last_stable_offset) == (10, 9)
        assert [(a.producer_id, a.first_offset) for a in partition.aborted_transactions] == [(ABORTER, 3)]

        producers = await client.call(
            ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}
        )
        states = {p.producer_id: p for p in producers.topics[0].partitions[0].active_producers}
        assert states[LINGERER].current_txn_start_offset == 9
        assert states[ABORTER].current_txn_start_offset == -1
        assert states[ABORTER].coordinator_epoch == 1


async def test_refused_verification_appends_nothing(tmp_path: Path) -> None:
    """A transactional batch the coordinator does not confirm is answered with its error and not written."""
    refusing = AnsweringVerifier(ErrorCode.invalid_txn_state)
    async with serving(tmp_path, refusing) as (_, port), connected(port) as client:
        await create_topic(client)
        answer = await produce(client, [b"x"], COMMITTER, transactional=True)
        assert answer.error_code == ErrorCode.invalid_txn_state
        assert await latest(client, isolation_level=0) == 0


@pytest.mark.parametrize("snapshots", ["kept", "lost"])
async def test_restart_mid_transaction_keeps_the_lso(tmp_path: Path, snapshots: str) -> None:
    """After a restart, from the stop's snapshot or from the log alone, the open transaction still
    holds the LSO, the abort is still indexed, and the later commit releases the LSO."""
    async with serving(tmp_path, AnsweringVerifier()) as (app, port), connected(port) as client:
        await create_topic(client)
        await write_mixed_log(app, client)
    saved = list((tmp_path / SNAPSHOT_DIR).glob("*.json"))
    assert saved, "the stop wrote the partition's snapshot"
    if snapshots == "lost":
        for path in saved:
            path.unlink()

    async with serving(tmp_path, AnsweringVerifier()) as (app, port), connected(port) as client:
        assert await latest(client, isolation_level=1) == 9
        partition = await fetch_committed(client)
        assert [(a.producer_id, a.first_offset) for a in partition.aborted_transactions] == [(ABORTER, 3)]
        assert await asyncio.to_thread(consume, port, "read_committed") == COMMITTED

        assert await end_transaction(app, LINGERER, committed=True, coordinator_epoch=2) == ErrorCode.none
        assert await latest(client, isolation_level=1) == 11
        assert await asyncio.to_thread(consume, port, "read_committed") == [*COMMITTED, b"c0"]


async def test_waiting_read_committed_fetch_wakes_on_the_commit(tmp_path: Path) -> None:
    """A long-polling read_committed Fetch at the LSO answers as soon as the marker moves the LSO."""
    async with serving(tmp_path, AnsweringVerifier()) as (app, port), connected(port) as client:
        await create_topic(client)
        await write_mixed_log(app, client)
        correlation_id = await client.send(ApiKey.FETCH, 11, fetch_committed_body(9, max_wait_ms=20_000))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        assert await end_transaction(app, LINGERER, committed=True, coordinator_epoch=1) == ErrorCode.none
        response = await client.recv(ApiKey.FETCH, 11, correlation_id, within_s=20)
        waited = time.monotonic() - started
        partition = response.responses[0].partitions[0]
        assert partition.last_stable_offset == 11
        assert partition.records, "the committed batch came with the answer"
        assert waited < 5, f"the Fetch waited {waited:.1f}s after the commit"


async def aiokafka_values(port: int, isolation_level: str, end: int) -> list[bytes]:
    """What aiokafka delivers from offset 0 until its position reaches ``end``."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}", isolation_level=isolation_level, enable_auto_commit=False
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        partition = AioTopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        async with asyncio.timeout(CONSUME_TIMEOUT_S):
            while await consumer.position(partition) < end:
                batches = await consumer.getmany(partition, timeout_ms=200)
                values.extend(bytes(m.value) for m in batches.get(partition, []) if m.value is not None)
    finally:
        await consumer.stop()
    return values


def kafka_python_values(port: int, isolation_level: str, end: int) -> list[bytes]:
    """What kafka-python 3 delivers from offset 0 until its position reaches ``end``."""
    consumer = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}", isolation_level=isolation_level, enable_auto_commit=False
    )
    values: list[bytes] = []
    try:
        partition = KpTopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while consumer.position(partition) < end:
            assert time.monotonic() < deadline, f"position {consumer.position(partition)} never reached {end}"
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in records)
    finally:
        consumer.close()
    return values


async def test_aiokafka_and_kafka_python_read_committed(tmp_path: Path) -> None:
    """aiokafka and kafka-python 3 drop the aborted transaction and stop at the LSO under read_committed."""
    async with serving(tmp_path, AnsweringVerifier()) as (app, port), connected(port) as client:
        await create_topic(client)
        await write_mixed_log(app, client)
        assert await aiokafka_values(port, "read_committed", 9) == COMMITTED
        assert await aiokafka_values(port, "read_uncommitted", 10) == EVERYTHING
        assert await asyncio.to_thread(kafka_python_values, port, "read_committed", 9) == COMMITTED
        assert await asyncio.to_thread(kafka_python_values, port, "read_uncommitted", 10) == EVERYTHING
