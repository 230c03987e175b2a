"""Produce handler: validation per partition, whole-request errors, idempotence, acks=0."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest

from kcoord.apis.broker import produce as produce_api
from kcoord.apis.broker.produce import handle_produce, produce_error
from kcoord.cluster.topic_names import CONSUMER_OFFSETS
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiRegistry
from kcoord.security.acl import AclOperation, ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import ConnectionInfo
from kcoord.server.router import CloseConnectionError, Router

from .data_path_helpers import (
    TRANSACTIONAL,
    DataPathApp,
    context,
    make_app,
    make_batch,
    on_the_wire,
    request,
)


@pytest.fixture
async def app(tmp_path: Path) -> DataPathApp:
    app = await make_app(tmp_path / "data", **{"message.max.bytes": 2000})
    await app.topics.create("t", 2)
    return app


def produce_body(
    *parts: tuple[str, int, bytes | None], acks: int = -1, txn: str | None = None
) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, records in parts:
        topics.setdefault(topic, []).append({"index": partition, "records": records})
    return {
        "transactional_id": txn,
        "acks": acks,
        "timeout": 1000,
        "topic_data": [{"name": name, "partition_data": data} for name, data in topics.items()],
    }


async def produce(
    app: DataPathApp, *parts: tuple[str, int, bytes | None], version: int = 9, **kw: Any
) -> Any:
    ctx = context(ApiKey.PRODUCE, version)
    req = request(ApiKey.PRODUCE, version, produce_body(*parts, **kw))
    return await handle_produce(
        ctx, req, topics=app.topics, producers=app.producers, authorizer=app.authorizer
    )


def answers(response: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(t["name"], p["index"]): p for t in response["responses"] for p in t["partition_responses"]}


async def test_appends_and_answers_base_offsets(app: DataPathApp) -> None:
    """Each append gets the next offsets of its partition and the log start offset is reported."""
    first = answers(await produce(app, ("t", 0, make_batch([b"a", b"b"])), ("t", 1, make_batch([b"c"]))))
    second = answers(await produce(app, ("t", 0, make_batch([b"d"]))))
    assert first[("t", 0)]["error_code"] == ErrorCode.none
    assert first[("t", 0)]["base_offset"] == 0
    assert first[("t", 1)]["base_offset"] == 0
    assert second[("t", 0)]["base_offset"] == 2
    assert second[("t", 0)]["log_start_offset"] == 0
    assert second[("t", 0)]["log_append_time"] is None
    assert app.topics.partition_log("t", 0).log_end_offset == 3  # type: ignore[union-attr]


async def test_log_append_time_topic_reports_the_broker_time(app: DataPathApp) -> None:
    """A LogAppendTime topic answers the time the broker stamped on the batch."""
    await app.topics.create("lat", 1, configs={"message.timestamp.type": "LogAppendTime"})
    response = await produce(app, ("lat", 0, make_batch([b"x"])))
    stamped = answers(response)[("lat", 0)]["log_append_time"]
    assert stamped > 1_700_000_000_000
    decoded = on_the_wire(ApiKey.PRODUCE, 9, response).responses[0].partition_responses[0]
    assert round(decoded.log_append_time.timestamp() * 1000) == stamped


async def test_unknown_topic_and_partition(app: DataPathApp) -> None:
    """Unknown topics are not auto-created by Produce and unknown partitions are refused."""
    result = answers(await produce(app, ("nope", 0, make_batch([b"a"])), ("t", 7, make_batch([b"a"]))))
    assert result[("nope", 0)]["error_code"] == ErrorCode.unknown_topic_or_partition
    assert result[("t", 7)]["error_code"] == ErrorCode.unknown_topic_or_partition
    assert app.topics.get("nope") is None


async def test_internal_topic_is_refused(app: DataPathApp) -> None:
    """Clients may not write to __consumer_offsets: INVALID_TOPIC_EXCEPTION."""
    await app.topics.create(CONSUMER_OFFSETS, 1, internal=True)
    result = answers(await produce(app, (CONSUMER_OFFSETS, 0, make_batch([b"a"]))))
    assert result[(CONSUMER_OFFSETS, 0)]["error_code"] == ErrorCode.invalid_topic_exception


async def test_message_too_large_fails_only_that_partition(app: DataPathApp) -> None:
    """A batch over message.max.bytes gets MESSAGE_TOO_LARGE; the other partition is appended."""
    result = answers(await produce(app, ("t", 0, make_batch([b"x" * 3000])), ("t", 1, make_batch([b"ok"]))))
    assert result[("t", 0)]["error_code"] == ErrorCode.message_too_large
    assert result[("t", 1)]["error_code"] == ErrorCode.none


async def test_topic_override_of_max_message_bytes(app: DataPathApp) -> None:
    """The topic's max.message.bytes override wins over the broker's message.max.bytes."""
    await app.topics.create("big", 1, configs={"max.message.bytes": "10000"})
    result = answers(await produce(app, ("big", 0, make_batch([b"x" * 3000]))))
    assert result[("big", 0)]["error_code"] == ErrorCode.none


async def test_corrupt_and_invalid_batches(app: DataPathApp) -> None:
    """A bad CRC or null records is CORRUPT_MESSAGE; two batches are INVALID_RECORD, with a message."""
    bad_crc = bytearray(make_batch([b"a"]))
    bad_crc[-1] ^= 0xFF
    two = make_batch([b"a"]) + make_batch([b"b"])
    result = answers(await produce(app, ("t", 0, bytes(bad_crc)), ("t", 1, two)))
    assert result[("t", 0)]["error_code"] == ErrorCode.corrupt_message
    assert result[("t", 1)]["error_code"] == ErrorCode.invalid_record
    assert result[("t", 1)]["error_message"]
    empty = answers(await produce(app, ("t", 0, None)))
    assert empty[("t", 0)]["error_code"] == ErrorCode.corrupt_message


async def test_invalid_acks_fails_the_whole_request(app: DataPathApp) -> None:
    """acks other than 0, 1, -1 raises INVALID_REQUIRED_ACKS, answered on every partition."""
    req = request(ApiKey.PRODUCE, 9, produce_body(("t", 0, make_batch([b"a"])), acks=2))
    with pytest.raises(KafkaError) as raised:
        await handle_produce(
            context(ApiKey.PRODUCE, 9),
            req,
            topics=app.topics,
            producers=app.producers,
            authorizer=app.authorizer,
        )
    assert raised.value.code == ErrorCode.invalid_required_acks
    shaped = answers(produce_error(req, raised.value.code))
    assert shaped[("t", 0)]["error_code"] == ErrorCode.invalid_required_acks


async def test_transactional_batch_is_refused(app: DataPathApp) -> None:
    """Without a verifier a transactional batch fails the request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    batch = make_batch([b"a"], producer_id=1, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL)
    with pytest.raises(KafkaError) as raised:
        await produce(app, ("t", 0, batch), txn="tx-1")
    assert raised.value.code == ErrorCode.transactional_id_authorization_failed
    assert app.topics.partition_log("t", 0).log_end_offset == 0  # type: ignore[union-attr]


async def test_acks_zero_sends_no_response(app: DataPathApp) -> None:
    """acks=0 appends and returns None (no response frame)."""
    assert await produce(app, ("t", 0, make_batch([b"a"])), acks=0) is None
    assert app.topics.partition_log("t", 0).log_end_offset == 1  # type: ignore[union-attr]


async def test_acks_zero_error_closes_the_connection(app: DataPathApp) -> None:
    """acks=0 with a failed partition closes the connection so the producer notices."""
    with pytest.raises(CloseConnectionError):
        await produce(app, ("nope", 0, make_batch([b"a"])), acks=0)


@pytest.mark.parametrize("version", [3, 5, 8, 9])
async def test_every_served_version_encodes(app: DataPathApp, version: int) -> None:
    """Successes and errors encode at v3-v9; log_start_offset appears from v5, error_message from v8."""
    parts = (("t", 0, make_batch([b"a"])), ("nope", 0, make_batch([b"a"])))
    decoded = on_the_wire(ApiKey.PRODUCE, version, await produce(app, *parts, version=version))
    ok, missing = decoded.responses[0].partition_responses[0], decoded.responses[1].partition_responses[0]
    assert (ok.error_code, ok.base_offset) == (ErrorCode.none, 0)
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    assert getattr(ok, "log_start_offset", None) == (0 if version >= 5 else None)


def test_advertised_versions(app: DataPathApp) -> None:
    """Produce is advertised from v0 (librdkafka compression gate) to v9."""
    spec = produce_api.api(topics=app.topics, producers=app.producers, authorizer=Authorizer())
    assert (spec.min_version, spec.max_version) == (0, 9)


async def test_versions_below_3_close_the_connection(app: DataPathApp) -> None:
    """Produce v0-v2 (message sets) have no schema: the router closes the connection."""
    frame = struct.pack(">hhih", ApiKey.PRODUCE, 2, 1, 0) + b"\x00\x01" + b"\x00" * 10
    with pytest.raises(CloseConnectionError):
        router = Router(
            ApiRegistry(
                [produce_api.api(topics=app.topics, producers=app.producers, authorizer=Authorizer())]
            )
        )
        await router.handle(frame, ConnectionInfo(1, "127.0.0.1", 1))


def idem(seq: int, count: int = 1, *, pid: int = 7, epoch: int = 0) -> bytes:
    return make_batch([b"v"] * count, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


async def test_idempotent_duplicate_returns_original_offset(app: DataPathApp) -> None:
    """A retried batch (same epoch and sequences) is not appended again and gets its first offset."""
    await produce(app, ("t", 0, make_batch([b"other"])))
    first = answers(await produce(app, ("t", 0, idem(0, 3))))[("t", 0)]
    await produce(app, ("t", 0, idem(3, 2)))
    retry = answers(await produce(app, ("t", 0, idem(0, 3))))[("t", 0)]
    assert first["base_offset"] == 1
    assert retry == {**first, "log_start_offset": 0}
    assert app.topics.partition_log("t", 0).log_end_offset == 6  # type: ignore[union-attr]


async def test_idempotent_gap_is_out_of_order(app: DataPathApp) -> None:
    """A sequence gap answers OUT_OF_ORDER_SEQUENCE_NUMBER and appends nothing."""
    await produce(app, ("t", 0, idem(0, 2)))
    gap = answers(await produce(app, ("t", 0, idem(5))))[("t", 0)]
    assert gap["error_code"] == ErrorCode.out_of_order_sequence_number
    assert app.topics.partition_log("t", 0).log_end_offset == 2  # type: ignore[union-attr]


async def test_idempotent_old_epoch_is_fenced(app: DataPathApp) -> None:
    """After a newer epoch has written, the older epoch gets INVALID_PRODUCER_EPOCH."""
    await produce(app, ("t", 0, idem(0, epoch=0)))
    await produce(app, ("t", 0, idem(0, epoch=1)))
    old = answers(await produce(app, ("t", 0, idem(1, epoch=0))))[("t", 0)]
    assert old["error_code"] == ErrorCode.invalid_producer_epoch


async def test_unknown_producer_with_nonzero_sequence_is_accepted(app: DataPathApp) -> None:
    """Producer state is not persisted: an unknown producer id may start at any sequence."""
    result = answers(await produce(app, ("t", 0, idem(42))))[("t", 0)]
    assert result["error_code"] == ErrorCode.none


async def test_pipelined_requests_append_in_request_order(app: DataPathApp) -> None:
    """Five in-flight requests of one idempotent producer, started together, all succeed in order."""
    ctx = context(ApiKey.PRODUCE, 9)
    coros = [
        handle_produce(
            ctx,
            request(ApiKey.PRODUCE, 9, produce_body(("t", 0, idem(2 * i, 2)), ("t", 1, idem(i)))),
            topics=app.topics,
            producers=app.producers,
            authorizer=app.authorizer,
        )
        for i in range(5)
    ]
    results = await asyncio.gather(*(asyncio.ensure_future(c) for c in coros))
    offsets = [answers(r)[("t", 0)]["base_offset"] for r in results]
    assert offsets == [0, 2, 4, 6, 8]
    assert all(answers(r)[("t", 1)]["error_code"] == ErrorCode.none for r in results)


class _FixedVerifier:
    """The transaction coordinator's KIP-890 answer, fixed, with the questions asked kept."""

    def __init__(self, answer: ErrorCode = ErrorCode.none) -> None:
        self.answer = answer
        self.asked: list[tuple[str, int, int, str, int]] = []

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        self.asked.append((transactional_id, producer_id, producer_epoch, topic, partition))
        return self.answer


class _NoTransactionalIds(Authorizer):
    """Allows everything but any operation on a TransactionalId."""

    enabled = True

    def authorize(
        self, principal: Any, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        return resource_type != ResourceType.TRANSACTIONAL_ID


async def produce_verified(
    app: DataPathApp, verifier: _FixedVerifier, *parts: tuple[str, int, bytes | None], **kw: Any
) -> Any:
    ctx = context(ApiKey.PRODUCE, 9)
    req = request(ApiKey.PRODUCE, 9, produce_body(*parts, **kw))
    return await handle_produce(
        ctx, req, topics=app.topics, producers=app.producers, authorizer=app.authorizer, verifier=verifier
    )


def txn_batch(value: bytes, base_sequence: int = 0) -> bytes:
    return make_batch(
        [value], producer_id=1, producer_epoch=0, base_sequence=base_sequence, attributes=TRANSACTIONAL
    )


async def test_verified_transactional_batch_opens_the_transaction(app: DataPathApp) -> None:
    """A batch the verifier accepts is appended and holds the partition's LSO at its offset."""
    verifier = _FixedVerifier()
    await produce(app, ("t", 0, make_batch([b"plain"])))
    answer = answers(await produce_verified(app, verifier, ("t", 0, txn_batch(b"a")), txn="tx-1"))
    assert answer[("t", 0)]["error_code"] == ErrorCode.none
    assert answer[("t", 0)]["base_offset"] == 1
    assert verifier.asked == [("tx-1", 1, 0, "t", 0)]
    assert app.producers.last_stable_offset("t", 0, 2) == 1


async def test_refused_transactional_batch_is_not_appended(app: DataPathApp) -> None:
    """The verifier's error is the partition's answer; other partitions of the request go on."""
    verifier = _FixedVerifier(ErrorCode.invalid_txn_state)
    answer = answers(
        await produce_verified(
            app, verifier, ("t", 0, txn_batch(b"a")), ("t", 1, make_batch([b"b"])), txn="tx-1"
        )
    )
    assert answer[("t", 0)]["error_code"] == ErrorCode.invalid_txn_state
    assert answer[("t", 1)]["error_code"] == ErrorCode.none
    assert app.topics.partition_log("t", 0).log_end_offset == 0  # type: ignore[union-attr]
    assert app.producers.last_stable_offset("t", 0, 0) == 0


async def test_transactional_batch_without_transactional_id_is_invalid(app: DataPathApp) -> None:
    """A transactional batch in a Produce without transactional_id is INVALID_RECORD, not verified."""
    verifier = _FixedVerifier()
    answer = answers(await produce_verified(app, verifier, ("t", 0, txn_batch(b"a"))))
    assert answer[("t", 0)]["error_code"] == ErrorCode.invalid_record
    assert verifier.asked == []


async def test_transactional_id_write_is_authorized(app: DataPathApp) -> None:
    """Without TransactionalId WRITE the whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    app.authorizer = _NoTransactionalIds()
    with pytest.raises(KafkaError) as raised:
        await produce_verified(app, _FixedVerifier(), ("t", 0, txn_batch(b"a")), txn="tx-1")
    assert raised.value.code == ErrorCode.transactional_id_authorization_failed
    assert app.topics.partition_log("t", 0).log_end_offset == 0  # type: ignore[union-attr]
