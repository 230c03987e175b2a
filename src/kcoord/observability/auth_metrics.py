"""Authentication metrics: logins that succeeded and failed, per listener and SASL mechanism."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class AuthMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.failures = Counter(
            "kcoord_authentication_failures",
            "Failed SASL logins (each answered after connection.failed.authentication.delay.ms).",
            ["listener", "mechanism"],
            registry=registry,
        )

    def failure(self, listener: str, mechanism: str) -> None:
        self.failures.labels(listener, mechanism).inc()
