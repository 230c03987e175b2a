"""KIP-848 (``group.protocol=consumer``) beside the classic protocol, with confluent-kafka.

Three ways to run N (10) librdkafka consumers on a 30-partition topic:

- ``classic eager``: classic protocol, ``range`` (every member revokes everything on a rebalance);
- ``classic cooperative``: classic protocol, ``cooperative-sticky`` (incremental, two rebalances);
- ``consumer``: KIP-848, the coordinator's ``uniform`` assignor, incremental reconciliation.

Per run and mode: *formation* is the time from a barrier releasing the N consumers (created
beforehand) until they own all 30 partitions exactly once; *join* starts one more consumer in the
formed group and times until the N+1 own them exactly once. During the join the section also adds
up, from the clients' rebalance callbacks, how long partitions had no owner: the partition-seconds
without owner and the longest single gap (eager stops the world; the others should move only what
the newcomer takes). Classic consumers use a 100 ms heartbeat interval; the consumer-protocol
server gets ``group.consumer.heartbeat.interval.ms=100`` so the comparison is like for like.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

import wire
from report import Measurement
from server import BenchServer, running_kcoord

DESCRIPTION = "classic (eager, cooperative) vs KIP-848 consumer groups: formation, join, unowned time"
PARTITIONS = 30
TIMEOUT_S = 30.0
POLL_S = 0.02
HEARTBEAT_MS = 100
MODES: dict[str, dict[str, Any]] = {
    "classic eager": {
        "partition.assignment.strategy": "range",
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "session.timeout.ms": 10_000,
    },
    "classic cooperative": {
        "partition.assignment.strategy": "cooperative-sticky",
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "session.timeout.ms": 10_000,
    },
    "consumer": {"group.protocol": "consumer", "group.remote.assignor": "uniform"},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("consumer_protocol")
    group.add_argument("--consumer-protocol-consumers", type=int, default=10, help="consumers per group (10)")
    group.add_argument(
        "--consumer-protocol-modes",
        nargs="+",
        default=list(MODES),
        help=f"modes (default: {', '.join(MODES)})",
    )


class Ownership:
    """Who owns which partition, from incremental callbacks (eager revokes everything first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owned: dict[int, set[int]] = {}
        self._holders = [0] * PARTITIONS
        self._unowned_since: dict[int, float] = {}
        self.unowned_total = 0.0
        self.longest_unowned = 0.0
        self.changed = threading.Condition(self._lock)

    def assign(self, member: int, partitions: list[int]) -> None:
        now = time.monotonic()
        with self._lock:
            for p in partitions:
                since = self._unowned_since.pop(p, None)
                if since is not None:
                    self.unowned_total += now - since
                    self.longest_unowned = max(self.longest_unowned, now - since)
                self._holders[p] += 1
                self.owned.setdefault(member, set()).add(p)
            self.changed.notify_all()

    def revoke(self, member: int, partitions: list[int]) -> None:
        now = time.monotonic()
        with self._lock:
            for p in partitions:
                if p in self.owned.get(member, set()):
                    self.owned[member].discard(p)
                    self._holders[p] -= 1
                    if self._holders[p] == 0:
                        self._unowned_since[p] = now
            self.changed.notify_all()

    def reset_gaps(self) -> None:
        with self._lock:
            self.unowned_total = 0.0
            self.longest_unowned = 0.0

    def wait_complete(self, members: int) -> float:
        """Monotonic time at which ``members`` members first owned every partition exactly once."""
        deadline = time.monotonic() + TIMEOUT_S
        with self._lock:
            while True:
                owners = [m for m in range(members) if self.owned.get(m)]
                if len(owners) == members and self._holders == [1] * PARTITIONS:
                    return time.monotonic()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no complete assignment over {members} members: {self.owned}")
                self.changed.wait(min(left, 0.05))


class Member:
    """One confluent consumer polling in its own thread until told to stop."""

    def __init__(self, index: int, config: dict[str, Any], topic: str, ownership: Ownership) -> None:
        from confluent_kafka import Consumer

        self.index = index
        self.consumer = Consumer(config)
        self.topic = topic
        self.ownership = ownership
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        own = self.ownership
        self.consumer.subscribe(
            [self.topic],
            on_assign=lambda _c, parts: own.assign(self.index, [p.partition for p in parts]),
            on_revoke=lambda _c, parts: own.revoke(self.index, [p.partition for p in parts]),
            on_lost=lambda _c, parts: own.revoke(self.index, [p.partition for p in parts]),
        )
        deadline = time.monotonic() + 4 * TIMEOUT_S
        while not self.stop.is_set() and time.monotonic() < deadline:
            self.consumer.poll(POLL_S)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(TIMEOUT_S)
        self.consumer.close()


def _one_run(
    bootstrap: str, topic: str, group: str, mode: str, count: int
) -> tuple[float, float, float, float]:
    """(formation s, join s, unowned partition-seconds during the join, longest unowned s)."""
    config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **MODES[mode]}
    ownership = Ownership()
    members = [Member(i, {**config, "client.id": f"{group}-{i}"}, topic, ownership) for i in range(count)]
    try:
        started = time.monotonic()
        for member in members:
            member.thread.start()
        formed = ownership.wait_complete(count) - started
        ownership.reset_gaps()
        joiner = Member(count, {**config, "client.id": f"{group}-{count}"}, topic, ownership)
        members.append(joiner)
        joined_at = time.monotonic()
        joiner.thread.start()
        joined = ownership.wait_complete(count + 1) - joined_at
        time.sleep(0.5)  # a cooperative second round would show up here
        return formed, joined, ownership.unowned_total, ownership.longest_unowned
    finally:
        for member in members:
            member.close()


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    del server  # the consumer protocol's heartbeat interval is a server setting
    count = options.consumer_protocol_consumers
    measurements: list[Measurement] = []
    settings = {
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
    }
    with running_kcoord(settings) as kcoord:
        for mode in options.consumer_protocol_modes:
            topic = f"kip848-{mode.replace(' ', '-')}"
            wire.create_topic(kcoord.bootstrap, topic, PARTITIONS)
            runs: list[tuple[float, float, float, float]] = []
            for number in range(options.runs):
                group = f"{topic}-{number}"
                try:
                    runs.append(_one_run(kcoord.bootstrap, topic, group, mode, count))
                except TimeoutError as error:
                    print(f"  {mode}: {error}", flush=True)
                    runs.append((float("inf"),) * 4)
                print(f"  {mode}, run {number + 1}: {runs[-1]}", flush=True)
            measurements += [
                Measurement(f"{mode}: formation, {count} members", "s", tuple(r[0] for r in runs)),
                Measurement(f"{mode}: join of 1 more", "s", tuple(r[1] for r in runs)),
                Measurement(f"{mode}: unowned during join", "partition-s", tuple(r[2] for r in runs)),
                Measurement(f"{mode}: longest unowned during join", "s", tuple(r[3] for r in runs)),
            ]
    return measurements
