"""A numbered storm from one idempotent confluent-kafka producer (enable.idempotence, acks=all),
run in a thread, bounded in count and time, remembering what was acknowledged and when."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message, Producer

from tests.support.clients import Consumed


@dataclass(frozen=True, slots=True)
class Ack:
    partition: int
    offset: int
    at: float
    """``time.monotonic()`` when the delivery report arrived."""


class Storm:
    """Sends ``records`` distinct values (``%08d``) to ``topic``; ``acked`` maps value -> Ack.

    Record ``i`` is keyed ``i % keys``, so every partition keeps getting records even while its
    leader is down (a keyless record goes to a partition whose leader is up); ``keys=None`` sends
    keyless records.
    """

    def __init__(
        self, bootstrap: str, topic: str, records: int, deadline_s: float, keys: int | None = 64
    ) -> None:
        self.topic = topic
        self.keys = keys
        self.records = records
        self.deadline_s = deadline_s
        self.acked: dict[bytes, Ack] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "batch.num.messages": 500,
                "message.timeout.ms": int(deadline_s * 1000),
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
            }
        )
        self.thread = threading.Thread(target=self._run, name="produce-storm", daemon=True)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
                return
            value, partition, offset = msg.value(), msg.partition(), msg.offset()
            assert isinstance(value, bytes) and partition is not None and offset is not None
            self.acked[value] = Ack(partition, offset, time.monotonic())

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, count: int, timeout: float) -> None:
        waited_until = time.monotonic() + timeout
        while self.acked_count() < count and time.monotonic() < waited_until:
            time.sleep(0.01)
        assert self.acked_count() >= count, f"the storm did not get going ({self.acked_count()} acks)"

    def _run(self) -> None:
        deadline = time.monotonic() + self.deadline_s
        for i in range(self.records):
            while time.monotonic() < deadline:
                try:
                    self.producer.produce(
                        self.topic,
                        key=None if self.keys is None else b"%d" % (i % self.keys),
                        value=b"%08d" % i,
                        on_delivery=self._delivered,
                    )
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.producer.poll(0)
        self.producer.flush(max(deadline - time.monotonic(), 1.0))


@dataclass(frozen=True, slots=True)
class StormCount:
    """What the log holds after a storm, against what was acknowledged."""

    acknowledged: int
    stored: int
    duplicates: int
    lost: int
    out_of_order: int
    """Partitions where a later offset holds a smaller number (idempotence keeps each in order)."""


def count_stored(storm: Storm, stored: list[Consumed]) -> StormCount:
    values = Counter(c.value for c in stored)
    duplicates = sum(n - 1 for n in values.values() if n > 1)
    lost = len(set(storm.acked) - set(values))
    by_partition: dict[int, list[Consumed]] = {}
    for record in stored:
        by_partition.setdefault(record.partition, []).append(record)
    out_of_order = 0
    for records in by_partition.values():
        numbers = [int(r.value or b"-1") for r in sorted(records, key=lambda r: r.offset)]
        out_of_order += any(a >= b for a, b in itertools.pairwise(numbers))
    return StormCount(len(storm.acked), len(stored), duplicates, lost, out_of_order)
