"""Produce (key 0), versions 0-9 advertised, 3-9 served.

- v0-v2: message sets (magic 0/1). Advertised only because librdkafka before 2.11.1 turns
  compression off unless Produce min 0 is advertised (KAFKA-18659), as Kafka 4 does; not served
  (kio has no schema below v3), so the router closes the connection on such a request, as Kafka 4
  does for versions it dropped. See :mod:`kcoord.protocol.registry` for the clients concerned.
- v3: record batch v2 only; ``transactional_id``.
- v4: KAFKA_STORAGE_ERROR may be returned.
- v5: ``log_start_offset`` per partition.
- v6, v7: no change to the body (v7: zstd allowed).
- v8: ``record_errors`` and ``error_message`` per partition.
- v9: flexible.

Per partition, in Kafka's order: unknown topic or partition => UNKNOWN_TOPIC_OR_PARTITION (no
auto-creation here; Kafka creates topics on Metadata only); an internal topic =>
INVALID_TOPIC_EXCEPTION; a batch over ``max.message.bytes`` => MESSAGE_TOO_LARGE; then the header
and CRC checks of :func:`kcoord.protocol.record_batch.validate_produced` (records are never
decoded); then, for a transactional batch, the transaction verification; then the idempotent
producer's epoch and sequence (:mod:`kcoord.cluster.producer_state`); then the append.

Whole request: ``acks`` outside {0, 1, -1} => INVALID_REQUIRED_ACKS. Transactional batches (issue
17): without a transaction verifier configured (no transaction coordinator), any transactional
batch => TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Kafka's answer when the transactional id may not be
used. With one, a ``transactional_id`` the principal may not WRITE (TransactionalId resource) =>
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request, as Kafka; per partition, a
transactional batch without a producer id, or in a request without ``transactional_id``, =>
INVALID_RECORD, else the verifier (KIP-890 part 1,
:class:`kcoord.cluster.transaction_markers.TransactionVerifier`) must answer NONE (its error is
the partition's answer), then the batch goes through the same epoch and sequence checks as an
idempotent one and opens its producer's transaction on the partition (the partition's last
stable offset stops there until the marker).

``acks=0`` sends no response; if a partition failed the connection is closed instead, so the
producer notices (Kafka does the same). ``timeout`` is ignored: on one node the append is the
whole acknowledgement, and durability follows the log's flush policy.

Ordering: a connection runs one request at a time (:mod:`kcoord.server.connection`), so one
connection's appends start in request order; each partition's append is started as a task in the
handler's first synchronous step (for a request with transactional batches, after the transaction
verifications, awaited together before any append of the request starts), and the idempotence
check runs in the same step as the append's offset assignment. Appends of different partitions of
one request run concurrently.

Authorization: Topic WRITE per topic, else TOPIC_AUTHORIZATION_FAILED for its partitions
(an idempotent producer needs nothing more, as in Kafka 3+).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import structlog

from kcoord.apis.access import Op, may, may_topic
from kcoord.apis.wiring import own_api
from kcoord.cluster.producer_state import BatchSlot, ProducerStateManager
from kcoord.cluster.topic_manager import TopicManager
from kcoord.cluster.topic_names import INTERNAL_TOPICS
from kcoord.cluster.transaction_markers import TransactionVerifier
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import BatchHeader, validate_produced
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext
from kcoord.server.router import CloseConnectionError
from kcoord.storage.api import PartitionLog

log = structlog.get_logger(__name__)

_VALID_ACKS = (0, 1, -1)
_ATTRIBUTES_LOW_BYTE = 22
_TRANSACTIONAL_FLAG = 0x10
_MAGIC_OFFSET = 16

PartitionResponse = dict[str, Any]


def produce_error(request: Any, code: ErrorCode) -> dict[str, Any]:
    """Every partition of the request answered with ``code``."""
    return {
        "responses": [
            {
                "name": topic.name,
                "partition_responses": [_error(p.index, code) for p in topic.partition_data],
            }
            for topic in request.topic_data
        ]
    }


async def handle_produce(
    ctx: RequestContext,
    request: Any,
    *,
    topics: TopicManager,
    producers: ProducerStateManager,
    authorizer: Authorizer,
    verifier: TransactionVerifier | None = None,
) -> dict[str, Any] | None:
    # 1. Whole-request checks.
    acks = int(request.acks)
    if acks not in _VALID_ACKS:
        raise KafkaError(ErrorCode.invalid_required_acks, f"acks must be 0, 1 or -1, not {acks}")
    transactional_id: str | None = getattr(request, "transactional_id", None)
    transactional = _has_transactional_batch(request)
    if transactional:
        if verifier is None:
            raise KafkaError(
                ErrorCode.transactional_id_authorization_failed,
                "transactions are not enabled on this node",
            )
        if transactional_id is not None and not may(
            ctx, authorizer, Op.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            raise KafkaError(
                ErrorCode.transactional_id_authorization_failed,
                f"TransactionalId WRITE on {transactional_id!r} is not authorized.",
            )

    # 2. Per partition: an immediate answer, or an append to start.
    api_version = ctx.api_version
    slots: list[list[PartitionResponse | _Accepted | asyncio.Task[PartitionResponse]]] = []
    for topic in request.topic_data:
        name = topic.name
        writable = may_topic(ctx, authorizer, Op.WRITE, name)
        info = topics.get(name)
        max_bytes = topics.max_message_bytes(info) if info is not None else 0
        internal = info is not None and (info.internal or name in INTERNAL_TOPICS)
        answers: list[PartitionResponse | _Accepted | asyncio.Task[PartitionResponse]] = []
        for part in topic.partition_data:
            index = int(part.index)
            if not writable:
                answers.append(_error(index, ErrorCode.topic_authorization_failed))
                continue
            partition_log = topics.partition_log(name, index) if info is not None else None
            if partition_log is None:
                answers.append(_error(index, topics.missing_log_error(name, index)))
                continue
            if internal:
                answers.append(
                    _error(
                        index, ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {name}"
                    )
                )
                continue
            records: bytes = part.records or b""
            if len(records) > max_bytes:
                answers.append(
                    _error(
                        index,
                        ErrorCode.message_too_large,
                        f"batch of {len(records)} bytes exceeds {max_bytes}",
                    )
                )
                continue
            try:
                header = validate_produced(records, api_version=api_version)
            except KafkaError as exc:
                answers.append(_error(index, exc.code, exc.message))
                continue
            if transactional:
                answers.append(_Accepted(partition_log, records, header))
            else:
                answers.append(asyncio.ensure_future(_append(producers, partition_log, records, header)))
        slots.append(answers)

    # 3. Transactional batches: the coordinator must know their partitions (all asked at once);
    # then every append of the request starts, in request order, in one synchronous step.
    if transactional:
        await _verify_all(
            [a for answers in slots for a in answers if isinstance(a, _Accepted)], transactional_id, verifier
        )
        _start_accepted(slots, producers)

    # 4. Wait for the appends; a closing connection does not cancel them.
    pending = [a for answers in slots for a in answers if isinstance(a, asyncio.Task)]
    if pending:
        await asyncio.shield(asyncio.wait(pending))
    responses = [
        {
            "name": topic.name,
            "partition_responses": [_settled(a) for a in answers],
        }
        for topic, answers in zip(request.topic_data, slots, strict=True)
    ]
    if acks == 0:
        failed = [
            f"{t['name']}-{p['index']}: {ErrorCode(p['error_code']).name}"
            for t in responses
            for p in t["partition_responses"]
            if p["error_code"] != ErrorCode.none
        ]
        if failed:
            raise CloseConnectionError(f"acks=0 produce failed ({', '.join(failed)})")
        return None
    return {"responses": responses}


@dataclass(slots=True, eq=False)
class _Accepted:
    """A partition's batch that passed the checks and waits for its append to start."""

    partition_log: PartitionLog
    records: bytes
    header: BatchHeader
    refused: ErrorCode = ErrorCode.none
    """Set when the transaction verification refused it."""


async def _verify_all(
    accepted: list[_Accepted], transactional_id: str | None, verifier: TransactionVerifier | None
) -> None:
    """Ask the verifier about every transactional batch; a refusal is kept on the batch."""
    checks: list[tuple[_Accepted, Awaitable[ErrorCode]]] = []
    for item in accepted:
        if not item.header.is_transactional:
            continue
        if transactional_id is None or verifier is None or item.header.producer_id < 0:
            item.refused = ErrorCode.invalid_record
            continue
        partition_log, header = item.partition_log, item.header
        checks.append(
            (
                item,
                verifier.verify(
                    transactional_id,
                    header.producer_id,
                    header.producer_epoch,
                    partition_log.topic,
                    partition_log.partition,
                ),
            )
        )
    if not checks:
        return
    verdicts = await asyncio.gather(*(check for _, check in checks), return_exceptions=True)
    for (item, _), verdict in zip(checks, verdicts, strict=True):
        if isinstance(verdict, KafkaError):
            item.refused = verdict.code
        elif isinstance(verdict, BaseException):
            log.error("produce.verification_failed", topic=item.partition_log.topic, error=repr(verdict))
            item.refused = ErrorCode.unknown_server_error
        else:
            item.refused = ErrorCode(verdict)


def _start_accepted(
    slots: list[list[PartitionResponse | _Accepted | asyncio.Task[PartitionResponse]]],
    producers: ProducerStateManager,
) -> None:
    """Replace each accepted batch by its append task, or by its refusal."""
    for answers in slots:
        for at, answer in enumerate(answers):
            if not isinstance(answer, _Accepted):
                continue
            if answer.refused != ErrorCode.none:
                answers[at] = _error(answer.partition_log.partition, answer.refused)
            else:
                answers[at] = asyncio.ensure_future(
                    _append(producers, answer.partition_log, answer.records, answer.header)
                )


def _settled(answer: PartitionResponse | _Accepted | asyncio.Task[PartitionResponse]) -> PartitionResponse:
    if isinstance(answer, asyncio.Task):
        return answer.result()
    if isinstance(answer, _Accepted):
        raise AssertionError("every accepted batch was started")
    return answer


async def _append(
    producers: ProducerStateManager, partition_log: PartitionLog, records: bytes, header: BatchHeader
) -> PartitionResponse:
    """Check the producer's sequence, append, and answer; never raises (errors become codes)."""
    index = partition_log.partition
    slot: BatchSlot | None = None
    try:
        if header.producer_id >= 0:
            slot = producers.check_and_record(
                partition_log.topic,
                index,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.record_count,
                header.max_timestamp,
            )
            if slot.duplicate:
                base_offset, append_time = await slot.original()
                log.info(
                    "produce.duplicate_answered",
                    topic=partition_log.topic,
                    partition=index,
                    producer_id=header.producer_id,
                    base_sequence=header.base_sequence,
                    base_offset=base_offset,
                )
                return _success(index, base_offset, append_time, partition_log.log_start_offset)
        provisional = partition_log.log_end_offset
        opened = header.is_transactional and producers.begin_transaction(
            partition_log.topic, index, header.producer_id, provisional
        )
        appending: Awaitable[Any] = partition_log.append(records)
        try:
            result = await appending
        except BaseException as exc:
            if slot is not None:
                producers.forget(partition_log.topic, index, header.producer_id, slot, exc)
            if opened:
                producers.cancel_transaction_start(
                    partition_log.topic, index, header.producer_id, provisional
                )
            raise
        if slot is not None:
            slot.complete(result.base_offset, result.log_append_time_ms)
        if opened:
            producers.settle_transaction_start(
                partition_log.topic, index, header.producer_id, provisional, result.base_offset
            )
        elif header.is_transactional:
            # Opened by an earlier batch whose append may have failed since: this one holds it then.
            producers.begin_transaction(partition_log.topic, index, header.producer_id, result.base_offset)
        return _success(index, result.base_offset, result.log_append_time_ms, result.log_start_offset)
    except KafkaError as exc:
        return _error(index, exc.code, exc.message)
    except OSError as exc:
        log.error("produce.storage_error", topic=partition_log.topic, partition=index, error=repr(exc))
        return _error(index, ErrorCode.kafka_storage_error, str(exc))
    except Exception:
        log.exception("produce.append_failed", topic=partition_log.topic, partition=index)
        return _error(index, ErrorCode.unknown_server_error)


def _has_transactional_batch(request: Any) -> bool:
    """Whether any partition carries a batch with the transactional attribute (bit 4)."""
    for topic in request.topic_data:
        for part in topic.partition_data:
            records = part.records
            if (
                records is not None
                and len(records) > _ATTRIBUTES_LOW_BYTE
                and records[_MAGIC_OFFSET] == 2
                and records[_ATTRIBUTES_LOW_BYTE] & _TRANSACTIONAL_FLAG
            ):
                return True
    return False


def _success(
    index: int, base_offset: int, log_append_time_ms: int, log_start_offset: int
) -> PartitionResponse:
    return {
        "index": index,
        "error_code": ErrorCode.none,
        "base_offset": base_offset,
        "log_append_time": log_append_time_ms if log_append_time_ms >= 0 else None,
        "log_start_offset": log_start_offset,
        "record_errors": [],
    }


def _error(index: int, code: ErrorCode, message: str | None = None) -> PartitionResponse:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": None,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


api = own_api(ApiKey.PRODUCE, "Produce", 0, 9, handle_produce, produce_error)
