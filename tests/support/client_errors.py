"""Every error real clients reported during a scenario, and whether each is retriable.

Tests that disturb the server (a PostgreSQL restart, ...) promise that clients see only retriable
errors. An :class:`ErrorLog` collects what each client surfaced — confluent-kafka's ``error_cb``,
delivery reports, consumer message errors and commit errors; kafka-python's and aiokafka's
exceptions and every error code in a broker answer they retried by themselves (the group drivers
report those as ``client_error`` events, see tests/groups/consumer_driver.py); the raw test
clients' error codes — and checks each one.

The verdict: an error carrying a Kafka error code is retriable when Kafka's own list says so
(kio's ``ErrorCode.retriable``, generated from Kafka's error table). A client-local error with no
Kafka code (librdkafka's negative codes, kafka-python's connection errors) is retriable when the
client marks it so, or when it is librdkafka's name for one of Kafka's retriable cases (a
transport failure is Kafka's NETWORK_EXCEPTION, a local timeout its REQUEST_TIMED_OUT).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError as ConfluentError
from kio.schema.errors import ErrorCode

from tests.support.group_clients import Driver

#: librdkafka's local errors that stand for one of Kafka's codes.
LIBRDKAFKA_EQUIVALENTS: dict[int, ErrorCode] = {
    ConfluentError._TRANSPORT: ErrorCode.network_exception,
    ConfluentError._TIMED_OUT: ErrorCode.request_timed_out,
    ConfluentError._WAIT_COORD: ErrorCode.coordinator_not_available,
}


def kafka_says_retriable(code: int) -> bool | None:
    """Kafka's verdict on error ``code``; None when Kafka has no such code."""
    try:
        return bool(ErrorCode(code).retriable)
    except ValueError:
        return None


@dataclass(frozen=True)
class ClientError:
    """One error as a client reported it: which client, where, its name and code, and its own flag."""

    client: str
    where: str
    name: str
    code: int | None
    client_says_retriable: bool

    @property
    def retriable(self) -> bool:
        if self.code is not None and self.code >= -1:  # Kafka's codes; librdkafka's own are -200..-100
            verdict = kafka_says_retriable(self.code)
            if verdict is not None:
                return verdict
        if self.client == "confluent" and self.code in LIBRDKAFKA_EQUIVALENTS:
            return bool(LIBRDKAFKA_EQUIVALENTS[self.code].retriable)
        return self.client_says_retriable

    def label(self) -> str:
        verdict = "retriable" if self.retriable else "NOT RETRIABLE"
        return f"{self.client} {self.where} {self.name} ({self.code}) {verdict}"


class ErrorLog:
    """The errors of every client in a scenario (thread-safe: callbacks run on client threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._errors: list[ClientError] = []

    def add(self, error: ClientError) -> None:
        with self._lock:
            self._errors.append(error)

    def confluent(self, where: str, error: ConfluentError) -> None:
        self.add(ClientError("confluent", where, error.name(), error.code(), error.retriable()))

    def exception(self, client: str, where: str, exc: BaseException) -> None:
        """A kafka-python / aiokafka exception: its class, ``errno`` and ``.retriable``."""
        code = getattr(exc, "errno", None)
        retriable = bool(getattr(exc, "retriable", False))
        self.add(
            ClientError(client, where, type(exc).__name__, code if isinstance(code, int) else None, retriable)
        )

    def raw(self, where: str, code: int) -> None:
        """An error code answered to one of the tests' raw clients."""
        self.add(ClientError("raw", where, ErrorCode(code).name.upper(), code, False))

    def from_drivers(self, drivers: Iterable[Driver], since: float = 0.0, until: float | None = None) -> None:
        """The ``client_error`` events group-member drivers reported between ``since`` and ``until``
        (monotonic), so that a group's own forming and closing stay outside the scenario."""
        for driver in drivers:
            for event in driver.of_kind("client_error", since=since):
                if until is not None and event["at"] > until:
                    continue
                client = driver.kind.client.removesuffix("-2")
                self.add(
                    ClientError(
                        client, event["where"], event["name"], event["code"], bool(event["retriable"])
                    )
                )

    @property
    def errors(self) -> list[ClientError]:
        with self._lock:
            return list(self._errors)

    def tally(self) -> Counter[str]:
        return Counter(error.label() for error in self.errors)

    def summary(self) -> str:
        counts = self.tally()
        lines = [f"{n:6d}  {label}" for label, n in sorted(counts.items())] or ["     0  (no client error)"]
        return "client errors seen:\n" + "\n".join(lines)

    def assert_only_retriable(self) -> None:
        print(self.summary())
        fatal = sorted({error.label() for error in self.errors if not error.retriable})
        assert not fatal, f"clients saw errors that are not retriable: {fatal}\n{self.summary()}"


@contextmanager
def watching_kafka_python(log: ErrorLog) -> Iterator[None]:
    """Record every non-zero error code kafka-python meets in a broker answer in this process.

    kafka-python turns each code into its exception class through ``kafka.errors.for_code`` and
    retries many without telling the application; wrapping that function (and restoring it after)
    sees them all while the client keeps its own behaviour.
    """
    import kafka.errors

    original = kafka.errors.for_code

    def for_code(error_code: int) -> Any:
        error_class = original(error_code)
        if error_code:
            retriable = bool(getattr(error_class, "retriable", False))
            log.add(ClientError("kafka-python", "response", error_class.__name__, error_code, retriable))
        return error_class

    kafka.errors.for_code = for_code
    try:
        yield
    finally:
        kafka.errors.for_code = original
