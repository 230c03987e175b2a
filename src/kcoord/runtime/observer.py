"""How the runtime reports what happens to offsets partitions, without knowing about Prometheus.

The composition root passes an implementation (the metrics at the edge); tests pass a recorder.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["NO_OBSERVER", "RuntimeObserver"]


class RuntimeObserver(Protocol):
    """Told of loads and failed appends of the offsets partitions."""

    def partition_loaded(self, partition: int, records: int, seconds: float) -> None:
        """A partition finished loading: ``records`` replayed in ``seconds``."""

    def load_failed(self, partition: int) -> None:
        """A partition's load raised; it is FAILED until a retry succeeds."""

    def append_failed(self, partition: int) -> None:
        """An append to a partition's log failed; the partition reloads from its log."""


class _NoObserver:
    def partition_loaded(self, partition: int, records: int, seconds: float) -> None:
        return None

    def load_failed(self, partition: int) -> None:
        return None

    def append_failed(self, partition: int) -> None:
        return None


NO_OBSERVER: RuntimeObserver = _NoObserver()
