"""Share groups (KIP-932) against a classic group: records acknowledged per second (issue 18, acceptance 7).

Per run and per count of `--share-groups-consumers` (1, 4 and 16): a new one-partition topic holding
`--share-groups-records` records and a new share group whose ``share.auto.offset.reset`` is set to
``earliest`` (IncrementalAlterConfigs on the group), read by that many confluent-kafka
``ShareConsumer`` s in explicit mode, each in its own thread: every record of a poll is acknowledged
ACCEPT, then ``commit_sync()`` (a ShareAcknowledge) confirms them. Then the same records on a
`--share-groups-classic-partitions` (16) partition topic, read by as many classic confluent-kafka
consumers of one group (``subscribe()``), each committing synchronously after every ``consume()``.

The figure is records acknowledged (share: accepted and confirmed by ``commit_sync``; classic:
covered by a committed offset) per second, from the first record delivered to the last one
acknowledged. Also the p99 of ``commit_sync`` timed by the client, the p99 of ShareAcknowledge from
the server's ``kcoord_request_duration_seconds`` (upper bound of its bucket, between scrapes of
``/metrics`` around the measurement) and, as a check, the server's count of accepted records
(``kcoord_share_records_acknowledged{type="accept"}``) during the measurement.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

import server_metrics
import wire
from group_formation import metrics_address
from report import Measurement
from server import BenchServer

DESCRIPTION = "records acknowledged/s by 1, 4, 16 ShareConsumers on one partition vs a classic group"
TIMEOUT_S = 60.0
POLL_S = 0.1
ACCEPTED = 'kcoord_share_records_acknowledged_total{type="accept"}'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("share_groups")
    group.add_argument(
        "--share-groups-consumers", type=int, nargs="+", default=[1, 4, 16], help="share consumers (1 4 16)"
    )
    group.add_argument(
        "--share-groups-records", type=int, default=100_000, help="records per measurement (100000)"
    )
    group.add_argument(
        "--share-groups-classic-partitions", type=int, default=16, help="classic group's partitions (16)"
    )
    group.add_argument("--share-groups-record-bytes", type=int, default=256, help="value size (256)")
    group.add_argument(
        "--share-groups-seconds", type=float, default=30.0, help="time cap of one measurement (30 s)"
    )


@dataclass
class Progress:
    """What the reader threads of one measurement did, shared between them."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    first_delivery: float | None = None
    acknowledged: int = 0
    last_acknowledged: float = 0.0
    commit_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    committed_offsets: dict[int, int] = field(default_factory=dict)
    """Classic group: the committed offset of every partition."""

    def delivered(self) -> None:
        with self.lock:
            if self.first_delivery is None:
                self.first_delivery = time.perf_counter()

    def confirmed(self, records: int, commit_s: float) -> None:
        with self.lock:
            self.acknowledged += records
            self.last_acknowledged = time.perf_counter()
            self.commit_s.append(commit_s)

    def committed(self, offsets: list[TopicPartition], commit_s: float) -> None:
        with self.lock:
            for tp in offsets:
                self.committed_offsets[tp.partition] = max(
                    self.committed_offsets.get(tp.partition, 0), tp.offset
                )
            self.acknowledged = sum(self.committed_offsets.values())
            self.last_acknowledged = time.perf_counter()
            self.commit_s.append(commit_s)

    def failed(self, error: str) -> None:
        with self.lock:
            self.errors.append(error)


def _share_reader(consumer: ShareConsumer, progress: Progress, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            messages = consumer.poll(POLL_S)
        except KafkaException as exc:
            progress.failed(str(exc))
            continue
        records = 0
        for message in messages:
            if message.error() is not None:
                progress.failed(str(message.error()))
                continue
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            records += 1
        if not records:
            continue
        progress.delivered()
        started = time.perf_counter()
        try:
            results = consumer.commit_sync(TIMEOUT_S)
        except KafkaException as exc:
            progress.failed(str(exc))
            continue
        failures = [str(error) for error in results.values() if error is not None]
        if failures:
            progress.failed(failures[0])
        else:
            progress.confirmed(records, time.perf_counter() - started)


def _classic_reader(consumer: Consumer, topic: str, progress: Progress, stop: threading.Event) -> None:
    while not stop.is_set():
        messages = consumer.consume(num_messages=500, timeout=POLL_S)
        positions: dict[int, int] = {}
        for message in messages:
            if message.error() is not None:
                progress.failed(str(message.error()))
                continue
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            positions[partition] = offset + 1
        if not positions:
            continue
        progress.delivered()
        offsets = [TopicPartition(topic, p, o) for p, o in positions.items()]
        started = time.perf_counter()
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            progress.failed(str(exc))
            continue
        progress.committed(offsets, time.perf_counter() - started)


def _fill(bootstrap: str, topic: str, partitions: int, records: int, value_bytes: int) -> None:
    wire.create_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    value = os.urandom(value_bytes)
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(TIMEOUT_S) != 0:
        raise TimeoutError(f"{topic} was not filled in time")


def _from_earliest(bootstrap: str, group: str) -> None:
    """The share group's ``share.auto.offset.reset=earliest``, so it reads what is already there."""
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(timeout=15)


@dataclass(frozen=True)
class Outcome:
    records_per_s: float
    commit_p99_ms: float
    server_p99_ms: float
    accepted_on_server: float


def _measure(
    server: BenchServer,
    records: int,
    seconds: float,
    readers: list[Callable[[threading.Event], None]],
    progress: Progress,
    api: str,
) -> Outcome:
    metrics = metrics_address(server)
    before = server_metrics.scrape(metrics)
    stop = threading.Event()
    threads = [threading.Thread(target=reader, args=(stop,), daemon=True) for reader in readers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + TIMEOUT_S + seconds
    try:
        while progress.acknowledged < records:
            first = progress.first_delivery
            if time.monotonic() > deadline or (first is not None and time.perf_counter() - first > seconds):
                break
            time.sleep(0.02)
    finally:
        stop.set()
        for thread in threads:
            thread.join(TIMEOUT_S)
    after = server_metrics.scrape(metrics)
    if progress.errors:
        print(f"    {len(progress.errors)} errors, first: {progress.errors[0]}", flush=True)
    if progress.first_delivery is None:
        raise TimeoutError("nothing was delivered")
    elapsed = progress.last_acknowledged - progress.first_delivery
    server_p99 = server_metrics.bucket_quantile(
        server_metrics.request_buckets(before, api), server_metrics.request_buckets(after, api), 0.99
    )
    ordered = sorted(progress.commit_s)
    return Outcome(
        records_per_s=progress.acknowledged / elapsed if elapsed > 0 else float("nan"),
        commit_p99_ms=ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000
        if ordered
        else float("nan"),
        server_p99_ms=server_p99 * 1000,
        accepted_on_server=server_metrics.sample(after, ACCEPTED) - server_metrics.sample(before, ACCEPTED),
    )


def _share_run(server: BenchServer, options: argparse.Namespace, run: int, count: int) -> Outcome:
    topic = group = f"share-{run}-{count}"
    records = options.share_groups_records
    _fill(server.bootstrap, topic, 1, records, options.share_groups_record_bytes)
    _from_earliest(server.bootstrap, group)
    config: dict[str, Any] = {
        "bootstrap.servers": server.bootstrap,
        "group.id": group,
        "share.acknowledgement.mode": "explicit",
        "log_level": 3,  # not librdkafka's warning, per consumer, that its share consumer is a preview
    }
    consumers = [ShareConsumer(config) for _ in range(count)]
    progress = Progress()
    for consumer in consumers:
        consumer.subscribe([topic])
    readers = [(lambda stop, c=consumer: _share_reader(c, progress, stop)) for consumer in consumers]
    try:
        return _measure(server, records, options.share_groups_seconds, readers, progress, "ShareAcknowledge")
    finally:
        for consumer in consumers:
            consumer.close()


def _classic_run(server: BenchServer, options: argparse.Namespace, run: int) -> Outcome:
    partitions = options.share_groups_classic_partitions
    topic = group = f"classic-{run}-{partitions}"
    records = options.share_groups_records
    _fill(server.bootstrap, topic, partitions, records, options.share_groups_record_bytes)
    config: dict[str, Any] = {
        "bootstrap.servers": server.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    consumers = [Consumer(config) for _ in range(partitions)]
    progress = Progress()
    for consumer in consumers:
        consumer.subscribe([topic])
    readers = [(lambda stop, c=consumer: _classic_reader(c, topic, progress, stop)) for consumer in consumers]
    try:
        return _measure(server, records, options.share_groups_seconds, readers, progress, "OffsetCommit")
    finally:
        for consumer in consumers:
            consumer.close()


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    counts: list[int] = options.share_groups_consumers
    partitions: int = options.share_groups_classic_partitions
    labels = [f"{n} share consumer{'s' if n > 1 else ''}, 1 partition" for n in counts]
    labels.append(f"classic group, {partitions} consumers, {partitions} partitions")
    outcomes: dict[str, list[Outcome]] = {label: [] for label in labels}
    for number in range(options.runs):
        for label, count in zip(labels, [*counts, 0], strict=True):
            if count:
                outcome = _share_run(server, options, number, count)
            else:
                outcome = _classic_run(server, options, number)
            outcomes[label].append(outcome)
            print(
                f"  run {number + 1}, {label}: {outcome.records_per_s:,.0f} records/s, "
                f"commit p99 {outcome.commit_p99_ms:.1f} ms, "
                f"accepted on the server {outcome.accepted_on_server:,.0f}",
                flush=True,
            )
    measurements: list[Measurement] = []
    for label in labels:
        runs = outcomes[label]
        share = not label.startswith("classic")
        commit = "commit_sync (ShareAcknowledge)" if share else "commit() (OffsetCommit)"
        server_api = "ShareAcknowledge" if share else "OffsetCommit"
        measurements += [
            Measurement(f"{label}: acknowledged", "records/s", tuple(o.records_per_s for o in runs)),
            Measurement(f"{label}: {commit} p99", "ms", tuple(o.commit_p99_ms for o in runs)),
            Measurement(
                f"{label}: {server_api} p99, server bucket", "ms", tuple(o.server_p99_ms for o in runs)
            ),
        ]
        if share:
            measurements.append(
                Measurement(
                    f"{label}: accepted (server count)", "records", tuple(o.accepted_on_server for o in runs)
                )
            )
    return measurements
