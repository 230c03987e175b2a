"""Records of ``__transaction_state`` and their byte layout: Kafka's TransactionLogKey/Value schemas.

One record per transactional id: the key names it, the value is its whole metadata after a
transition, and a null value (tombstone) removes an expired id. The layouts follow Apache Kafka's
coordinator message schemas:

==========================  ===========================================================
key (record type 0)         int16 0, then TransactionalId (int16-length string); never flexible
TransactionLogValue v0      ProducerId i64, ProducerEpoch i16, TransactionTimeoutMs i32,
                            TransactionStatus i8, TransactionPartitions?[Topic, [i32]],
                            TransactionLastUpdateTimestampMs i64, TransactionStartTimestampMs i64
TransactionLogValue v1      the same, flexible (compact strings and arrays, tagged fields):
                            tag 0 PreviousProducerId i64 (default -1), tag 1 NextProducerId
                            i64 (default -1), tag 2 ClientTransactionVersion i16 (default 0)
==========================  ===========================================================

TransactionPartitions is null for the Empty state and a (possibly empty) array otherwise. kcoord
writes version 1 so the previous producer id survives a reload (KIP-360's retry after an epoch
rotation needs it); a tagged field equal to its default is left out, as Kafka's generated code
does. Unknown tags are skipped. Anything malformed raises :class:`RecordDecodeError` naming the
field and offset; another key type decodes to None, so replay skips it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcoord.coordinator.record_fields import IntTag, read_int_tags, read_value_version, write_int_tags
from kcoord.coordinator.record_io import RecordDecodeError, RecordEncodeError, RecordReader, RecordWriter

__all__ = [
    "TRANSACTION_LOG_KEY_TYPE",
    "TopicPartition",
    "TransactionLogKey",
    "TransactionLogValue",
    "TransactionRecord",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_value",
]

TRANSACTION_LOG_KEY_TYPE = 0
VALUE_VERSIONS = range(2)
WRITE_VERSION = 1
_FLEXIBLE_FROM = 1
NO_PRODUCER_ID = -1

_STATUSES = range(8)
"""Kafka's TransactionState ids, Empty (0) to PrepareEpochFence (7)."""


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    transactional_id: str


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One transactional id's metadata as the log holds it (Kafka's ``TxnTransitMetadata``)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    """The state's id byte (:class:`~kcoord.coordinator.transactions.state.TransactionState`)."""
    partitions: tuple[TopicPartition, ...] | None
    """Sorted; None (null on the wire) only in the Empty state."""
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


_TAGS = (
    IntTag(0, "previous_producer_id", RecordWriter.int64, RecordReader.int64, NO_PRODUCER_ID),
    IntTag(1, "next_producer_id", RecordWriter.int64, RecordReader.int64, NO_PRODUCER_ID),
    IntTag(2, "client_transaction_version", RecordWriter.int16, RecordReader.int16, 0),
)
"""TransactionLogValue v1's tagged fields, left out at their defaults."""


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    """One record of ``__transaction_state``; ``value=None`` is a tombstone (the id expired)."""

    key: TransactionLogKey
    value: TransactionLogValue | None


def encode_key(key: TransactionLogKey) -> bytes:
    out = RecordWriter("TransactionLogKey")
    out.int16(TRANSACTION_LOG_KEY_TYPE, "version")
    out.string(key.transactional_id, "transactional_id")
    return out.getvalue()


def encode_value(value: TransactionLogValue | None, version: int = WRITE_VERSION) -> bytes | None:
    """The value's bytes at ``version`` (0 or 1); None for a tombstone."""
    if value is None:
        return None
    if version not in VALUE_VERSIONS:
        raise RecordEncodeError(f"TransactionLogValue has no version {version}")
    flexible = version >= _FLEXIBLE_FROM
    out = RecordWriter("TransactionLogValue", flexible=flexible)
    out.int16(version, "version")
    out.int64(value.producer_id, "producer_id")
    out.int16(value.producer_epoch, "producer_epoch")
    out.int32(value.timeout_ms, "timeout_ms")
    out.int8(value.status, "status")
    _write_partitions(out, value.partitions, flexible)
    out.int64(value.last_update_ms, "last_update_ms")
    out.int64(value.start_ms, "start_ms")
    if flexible:
        out.tagged_fields(write_int_tags(out, value, _TAGS))
    return out.getvalue()


def _write_partitions(
    out: RecordWriter, partitions: tuple[TopicPartition, ...] | None, flexible: bool
) -> None:
    if partitions is None:  # null: 0 as a compact (length + 1) length, -1 as an int32 one
        if flexible:
            out.uvarint(0)
        else:
            out.int32(-1, "partitions")
        return
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out.array_length(len(by_topic), "partitions")
    for topic, ids in by_topic.items():
        out.string(topic, "partitions.topic")
        out.array_length(len(ids), "partitions.partition_ids")
        for partition in ids:
            out.int32(partition, "partitions.partition_ids")
        out.empty_tagged_fields()


def decode_key(key: bytes) -> TransactionLogKey | None:
    """The key, or None for a record type that is not a transaction log key."""
    reader = RecordReader(key, "TransactionLogKey")
    if reader.int16("version") != TRANSACTION_LOG_KEY_TYPE:
        return None
    decoded = TransactionLogKey(reader.string("transactional_id", False))
    reader.finish()
    return decoded


def decode_value(value: bytes) -> TransactionLogValue:
    reader = RecordReader(value, "TransactionLogValue")
    version = read_value_version(reader, VALUE_VERSIONS, "TransactionLogValue")
    flexible = version >= _FLEXIBLE_FROM
    producer_id = reader.int64("producer_id")
    producer_epoch = reader.int16("producer_epoch")
    timeout_ms = reader.int32("timeout_ms")
    status = reader.int8("status")
    if status not in _STATUSES:
        raise RecordDecodeError(f"TransactionLogValue: unknown transaction status {status}")
    partitions = _read_partitions(reader, flexible)
    last_update_ms = reader.int64("last_update_ms")
    start_ms = reader.int64("start_ms")
    tags = reader.tagged_fields("TransactionLogValue") if flexible else {}
    reader.finish()
    return TransactionLogValue(
        producer_id,
        producer_epoch,
        timeout_ms,
        status,
        partitions,
        last_update_ms,
        start_ms,
        **read_int_tags(reader, tags, _TAGS),
    )


def _read_partitions(reader: RecordReader, flexible: bool) -> tuple[TopicPartition, ...] | None:
    count = reader.uvarint("partitions") - 1 if flexible else reader.int32("partitions")
    if count == -1:
        return None
    if count < -1:
        raise RecordDecodeError(f"TransactionLogValue: partitions has invalid length {count}")
    partitions: list[TopicPartition] = []
    for _ in range(count):
        topic = reader.string("partitions.topic", flexible)
        for _ in range(reader.array_length("partitions.partition_ids", flexible)):
            partitions.append(TopicPartition(topic, reader.int32("partitions.partition_ids")))
        if flexible:
            reader.skip_tagged_fields("PartitionsSchema")
    return tuple(sorted(set(partitions)))


def decode_record(key: bytes, value: bytes | None) -> TransactionRecord | None:
    """One record of the log, or None for a key type this coordinator does not know."""
    decoded_key = decode_key(key)
    if decoded_key is None:
        return None
    return TransactionRecord(decoded_key, None if value is None else decode_value(value))
