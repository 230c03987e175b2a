"""The round-trip scenario every real client runs: which messages to send and how to check what came back.

Message ``i`` has key ``key-{i % KEYS}``, a value that starts with ``i`` (padded so that codecs have
something to compress), two headers (``seq`` = i, ``origin`` = the client's name) and the timestamp
``base_timestamp + i``. Readers hand back :class:`Consumed` tuples; :func:`verify_round_trip` checks
that every message came back exactly once, in order within its partition, with key, value,
headers and timestamp intact. Nothing here imports a client library, so the kafka-python 2.0.2
subprocess script can use it too (it is loaded by file path there).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

KEYS = 97
MESSAGES = 10_000
PARTITIONS = 6
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_PADDING = "-abcdefghij" * 8


@dataclass(frozen=True)
class Message:
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int

    @classmethod
    def of(cls, record: Any) -> Consumed:
        """From a kafka-python or aiokafka ConsumerRecord (they share these attribute names)."""
        return cls(
            partition=record.partition,
            offset=record.offset,
            key=record.key,
            value=record.value,
            headers=tuple(record.headers),
            timestamp_ms=record.timestamp,
        )


def base_timestamp() -> int:
    """A round CreateTime a little in the past, so message timestamps never lie in the future."""
    return (int(time.time() * 1000) // 1000 - 60) * 1000


def make_messages(origin: str, count: int = MESSAGES, base_ts: int | None = None) -> list[Message]:
    start = base_timestamp() if base_ts is None else base_ts
    return [
        Message(
            key=f"key-{i % KEYS}".encode(),
            value=f"{i}{_PADDING}".encode(),
            headers=(("seq", str(i).encode()), ("origin", origin.encode())),
            timestamp_ms=start + i,
        )
        for i in range(count)
    ]


def sequence_of(value: bytes | None) -> int:
    assert value is not None, "a null value came back"
    return int(value.split(b"-", 1)[0])


def verify_round_trip(
    sent: Sequence[Message],
    received: Iterable[Consumed],
    *,
    partitions: int = PARTITIONS,
    check_timestamps: bool = True,
) -> dict[int, int]:
    """Assert exactly-once, per-partition order and intact fields; returns the count per partition."""
    by_partition: dict[int, list[Consumed]] = defaultdict(list)
    for record in received:
        by_partition[record.partition].append(record)
    assert set(by_partition) <= set(range(partitions)), sorted(by_partition)

    seen: set[int] = set()
    key_partition: dict[bytes | None, int] = {}
    for partition, records in by_partition.items():
        offsets = [r.offset for r in records]
        assert offsets == list(range(len(records))), f"partition {partition}: offsets not 0..n-1 in order"
        last_sequence = -1
        for record in records:
            sequence = sequence_of(record.value)
            assert sequence not in seen, f"message {sequence} came back twice"
            seen.add(sequence)
            expected = sent[sequence]
            assert record.key == expected.key, (sequence, record.key)
            assert record.value == expected.value, sequence
            assert tuple(record.headers) == expected.headers, (sequence, record.headers)
            if check_timestamps:
                assert record.timestamp_ms == expected.timestamp_ms, (sequence, record.timestamp_ms)
            assert key_partition.setdefault(record.key, partition) == partition, f"key {record.key!r} split"
            assert last_sequence < sequence, f"partition {partition}: {sequence} after {last_sequence}"
            last_sequence = sequence
    missing = set(range(len(sent))) - seen
    assert not missing, f"{len(missing)} messages missing, e.g. {sorted(missing)[:5]}"
    return {p: len(r) for p, r in sorted(by_partition.items())}
