"""``__transaction_state``'s records as the coordinator runtime writes and reads them.

A :class:`~kcoord.runtime.coordinator_type.RecordSerde` (matched by shape: the core does not import
the runtime). Batches are uncompressed, as Kafka enforces for this topic. There is no load
shortcut: one record per transactional id, compacted, is little to replay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.coordinator.transactions.records import (
    TransactionRecord,
    decode_record,
    encode_key,
    encode_value,
)
from kcoord.protocol.plain_batch import EncodedBatch, encode_for_log

FastReplay = Callable[[bytes, "bytes | None"], bool]
"""The runtime's load shortcut type (``kcoord.runtime.coordinator_type.FastReplay``)."""

__all__ = ["TransactionRecordSerde"]


class TransactionRecordSerde:
    def encode_batch(self, records: list[TransactionRecord], now_ms: int) -> EncodedBatch:
        return encode_for_log([(encode_key(r.key), encode_value(r.value)) for r in records], now_ms)

    def decode(self, key: bytes, value: bytes | None) -> TransactionRecord | None:
        return decode_record(key, value)

    def fast_replay(self, shard: Any) -> FastReplay | None:
        return None
