"""A coordinator's records as its runtime writes and reads them, built from the key and value codecs.

A :class:`~kcoord.runtime.coordinator_type.RecordSerde` (matched by shape: the core does not import
the runtime) for a coordinator whose records are a key and a value (None: a tombstone), written as
one uncompressed batch, with no load shortcut. The group coordinator's serde, which has one, is
its own (:mod:`kcoord.runtime.group_coordinator`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from kcoord.protocol.plain_batch import EncodedBatch, encode_for_log

__all__ = ["KeyValueSerde"]


class _Record(Protocol):
    @property
    def key(self) -> Any: ...

    @property
    def value(self) -> Any: ...


_R = TypeVar("_R", bound=_Record)


class KeyValueSerde(Generic[_R]):
    def __init__(
        self,
        encode_key: Callable[[Any], bytes],
        encode_value: Callable[[Any], bytes | None],
        decode: Callable[[bytes, bytes | None], _R | None],
    ) -> None:
        self._encode_key = encode_key
        self._encode_value = encode_value
        self._decode = decode

    def encode_batch(self, records: list[_R], now_ms: int) -> EncodedBatch:
        return encode_for_log(
            [(self._encode_key(r.key), self._encode_value(r.value)) for r in records], now_ms
        )

    def decode(self, key: bytes, value: bytes | None) -> _R | None:
        """One record, or None for a record type this coordinator does not know (skipped)."""
        return self._decode(key, value)

    def fast_replay(self, shard: Any) -> None:
        """No load shortcut: these coordinators' logs are compacted and small to replay."""
        return
