"""Which ``__consumer_offsets`` partition owns a group: Kafka's ``partitionFor``.

Kafka computes ``Utils.abs(groupId.hashCode()) % numPartitions``. ``String.hashCode`` is
``h = 31*h + c`` over UTF-16 code units (a character outside the BMP counts as its two
surrogates) with signed 32-bit wrap-around, and ``Utils.abs(Integer.MIN_VALUE)`` is 0, not
MIN_VALUE. Clients and other brokers agree on the coordinator only if these match bit for bit.

Speed: instead of a Python loop per character, the hash is the dot product of the code units
with precomputed powers of 31 (mod 2**32), done by ``sum(map(mul, ...))`` in C; results are
also cached, since the same few group ids ask for their coordinator again and again.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from operator import mul

__all__ = ["java_string_hash", "partition_for"]

_MASK32 = 0xFFFFFFFF
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"

# _POWERS[i] == 31**i mod 2**32; grown on demand for longer strings.
_POWERS: list[int] = [1]


def _powers_descending(length: int) -> list[int]:
    """``[31**(length-1), ..., 31**0]`` mod 2**32."""
    while len(_POWERS) < length:
        _POWERS.append((_POWERS[-1] * 31) & _MASK32)
    return _POWERS[length - 1 :: -1] if length else []


@lru_cache(maxsize=4096)
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` of ``s`` as a signed 32-bit int."""
    if s.isascii():
        units: bytes | memoryview = s.encode("ascii")
    else:
        units = memoryview(s.encode(_UTF16_NATIVE)).cast("H")
    h: int = sum(map(mul, units, _powers_descending(len(units)))) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The offsets-log partition of ``group_id``: ``Utils.abs(hash) % num_partitions``."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
