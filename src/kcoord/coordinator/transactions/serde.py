"""``__transaction_state``'s records as the coordinator runtime writes and reads them.

A :class:`~kcoord.coordinator.record_serde.KeyValueSerde` of the transaction log's codecs.
Batches are uncompressed, as Kafka enforces for this topic. There is no load shortcut: one record
per transactional id, compacted, is little to replay.
"""

from __future__ import annotations

from kcoord.coordinator.record_serde import KeyValueSerde
from kcoord.coordinator.transactions.records import (
    TransactionRecord,
    decode_record,
    encode_key,
    encode_value,
)

__all__ = ["TransactionRecordSerde"]


class TransactionRecordSerde(KeyValueSerde[TransactionRecord]):
    def __init__(self) -> None:
        super().__init__(encode_key, encode_value, decode_record)
