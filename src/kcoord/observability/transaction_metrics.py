"""Transaction coordinator metrics: open transactions, completions, timeouts, the oldest's age.

The coordinator reports completions and timeouts through its observer interface
(:class:`~kcoord.runtime.transaction_coordinator.TransactionObserver`); the open transactions and
the oldest one's age are read from it when Prometheus scrapes.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

from kcoord.runtime.transaction_coordinator import TransactionStats

__all__ = ["TransactionMetrics"]


class TransactionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.completed = Counter(
            "kcoord_transactions_completed",
            "Transactions whose markers are all written, by result (commit or abort).",
            ["result"],
            registry=registry,
        )
        self.timeouts = Counter(
            "kcoord_transaction_timeouts",
            "Transactions aborted by the coordinator because they outlived transaction.timeout.ms.",
            registry=registry,
        )
        self._open = Gauge(
            "kcoord_transactions_open",
            "Transactions open on this node's __transaction_state partitions (Ongoing or completing).",
            registry=registry,
        )
        self._oldest = Gauge(
            "kcoord_transaction_oldest_open_age_seconds",
            "How long the oldest open transaction on this node has been running (0 when none is open).",
            registry=registry,
        )
        for result in ("commit", "abort"):
            self.completed.labels(result)

    def watch(self, stats: Callable[[], TransactionStats]) -> None:
        """Read open transactions and the oldest one's age from ``stats`` at each scrape."""
        self._open.set_function(lambda: stats().open_transactions)
        self._oldest.set_function(lambda: stats().oldest_age_ms / 1000)

    def transaction_completed(self, committed: bool) -> None:
        self.completed.labels("commit" if committed else "abort").inc()

    def transactions_timed_out(self, count: int) -> None:
        self.timeouts.inc(count)
