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

from tests.support import group_clients
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


#: What Kafka answers healthy members to steer them through a rebalance (a new member's first
#: JoinGroup, a heartbeat or commit while the group rebalances): every group test meets these.
GROUP_PROTOCOL_FLOW: frozenset[int] = frozenset(
    {int(ErrorCode.member_id_required), int(ErrorCode.rebalance_in_progress)}
)


#: What a client reports while every broker it knows is unreachable (the test's only server is down,
#: or every connection to it is cut): librdkafka's _ALL_BROKERS_DOWN, which it flags not retriable.
SERVER_UNREACHABLE: frozenset[int] = frozenset({ConfluentError._ALL_BROKERS_DOWN})

#: Every code Kafka's error table marks retriable: what a test allows while it causes a fault.
RETRIABLE_CODES: frozenset[int] = frozenset(int(code) for code in ErrorCode if code.retriable)


@dataclass(frozen=True)
class ClientError:
    """One error as a client reported it: which client, where, its name and code, its own flag, and
    when (monotonic) the test saw it."""

    client: str
    where: str
    name: str
    code: int | None
    client_says_retriable: bool
    at: float | None = None

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
            for error in driver_errors(driver):
                if error.at is not None and (error.at < since or (until is not None and error.at > until)):
                    continue
                self.add(error)

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


def driver_errors(driver: Driver) -> list[ClientError]:
    """Every error a group-member driver reported: its ``client_error`` events, and kafkajs's
    ``error`` events (it has no codes to report, only its crashes)."""
    client = driver.kind.client.removesuffix("-2")
    errors = [
        ClientError(client, e["where"], e["name"], e["code"], bool(e["retriable"]), float(e["at"]))
        for e in driver.of_kind("client_error")
    ]
    if driver.kind.client == "kafkajs":
        errors += [
            ClientError(client, "error", str(e.get("message"))[:200], None, False, float(e["at"]))
            for e in driver.of_kind("error")
        ]
    return errors


def code_numbers(names_or_codes: Iterable[int | str]) -> frozenset[int]:
    """Kafka error codes given as numbers or as names (``"NOT_COORDINATOR"``, ``"not_coordinator"``)."""
    return frozenset(
        int(ErrorCode[item.lower()]) if isinstance(item, str) else int(item) for item in names_or_codes
    )


def unexpected_group_errors(allowed: Iterable[int | str]) -> list[str]:
    """Judge every Group made since the last call: the errors its members reported that are neither
    group-protocol flow, nor among ``allowed``, nor retriable inside one of the group's fault windows.
    """
    codes = GROUP_PROTOCOL_FLOW | code_numbers(allowed)
    groups = list(group_clients.GROUPS)
    group_clients.GROUPS.clear()
    found: list[str] = []
    for group in groups:
        for driver in group.all_drivers:
            for error in driver_errors(driver):
                if error.code is not None and error.code in codes:
                    continue
                windows = [w for w in group.fault_windows if w.start <= (error.at or 0.0) <= w.end]
                if any(error.retriable or error.code in w.also for w in windows):
                    continue
                found.append(f"{group.group} {driver.name}: {error.label()}")
    return found
