"""Time for N consumers started together to form a group, per client and initial rebalance delay.

For each ``--group-formation-delays`` value (0 and 300 ms) the section starts its own kcoord with
``--set group.initial.rebalance.delay.ms=<delay>`` (the section's default server is not used),
creates a 30-partition topic per client, and per run a new group: N (10) consumers of one client
library are created and connected first; then a barrier releases them together, each calls
``subscribe()``, and the clock runs until every consumer holds a non-empty assignment and the
assignments cover all 30 partitions exactly once (seen from the clients' rebalance callbacks).

Client settings (the ones that matter for formation time, all documented in README.md):
heartbeat interval 100 ms (members already in the group learn of a rebalance from a heartbeat
answer: the defaults of 3 s would dominate), session 10 s, auto commit off, range assignor.
kafka-python runs its consumers in threads (each polls every 20 ms); confluent-kafka in threads
(poll 20 ms); aiokafka as tasks of one event loop (getmany 20 ms).

A run that does not form within 30 s counts as ``inf`` (and prints every consumer's assignment).
After each run the server's own view of the group is read from ``/v1/groups/<group>`` on the
metrics listener: how many rebalances it took and the last one's join and sync phase durations.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import wire
from report import Measurement
from server import BenchServer, running_kcoord

DESCRIPTION = "N consumers started together form a group on 30 partitions: seconds per client and delay"
PARTITIONS = 30
FORMATION_TIMEOUT_S = 30.0
POLL_S = 0.02
CLIENT_SETTINGS = {"heartbeat_ms": 100, "session_ms": 10_000}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("group_formation")
    group.add_argument("--group-formation-consumers", type=int, default=10, help="consumers per group (10)")
    group.add_argument(
        "--group-formation-delays",
        type=int,
        nargs="+",
        default=[0, 300],
        help="group.initial.rebalance.delay.ms values (default: 0 300)",
    )
    group.add_argument(
        "--group-formation-clients",
        nargs="+",
        default=["kafka-python", "confluent", "aiokafka"],
        help="clients to measure (default: kafka-python confluent aiokafka)",
    )


class Formation:
    """Every consumer's current assignment; notes the first moment they partition the topic."""

    def __init__(self, consumers: int) -> None:
        self._lock = threading.Lock()
        self._assigned: list[frozenset[int]] = [frozenset()] * consumers
        self.started = 0.0
        self.formed_s: float | None = None
        self.done = threading.Event()

    def update(self, index: int, partitions: frozenset[int]) -> None:
        with self._lock:
            self._assigned[index] = partitions
            if self.formed_s is None and self._complete():
                self.formed_s = time.monotonic() - self.started
                self.done.set()

    def revoke(self, index: int, partitions: frozenset[int]) -> None:
        with self._lock:
            self._assigned[index] = self._assigned[index] - partitions

    def _complete(self) -> bool:
        if not all(self._assigned):
            return False
        union = frozenset().union(*self._assigned)
        return len(union) == PARTITIONS and sum(map(len, self._assigned)) == PARTITIONS

    def wait(self) -> float:
        """Seconds from the barrier to formation; TimeoutError (with every assignment) if it never formed."""
        if not self.done.wait(FORMATION_TIMEOUT_S) or self.formed_s is None:
            raise TimeoutError(f"group did not form within {FORMATION_TIMEOUT_S} s: {self._assigned}")
        return self.formed_s


def _threaded(
    consumers: list[Any], formation: Formation, subscribe: Callable[[int], None], poll: Callable[[int], None]
) -> float:
    """Start one thread per consumer behind a barrier; each subscribes, then polls until formed."""
    barrier = threading.Barrier(len(consumers) + 1)

    def member(index: int) -> None:
        barrier.wait()
        subscribe(index)
        deadline = time.monotonic() + FORMATION_TIMEOUT_S
        while not formation.done.is_set() and time.monotonic() < deadline:
            poll(index)

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(len(consumers))]
    for thread in threads:
        thread.start()
    barrier.wait()
    formation.started = time.monotonic()
    try:
        return formation.wait()
    finally:
        for thread in threads:
            thread.join(FORMATION_TIMEOUT_S)


def form_kafka_python(bootstrap: str, topic: str, group: str, count: int) -> float:
    from kafka import KafkaConsumer  # type: ignore[import-untyped]

    formation = Formation(count)
    consumers = [
        KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=f"{group}-{i}",
            enable_auto_commit=False,
            heartbeat_interval_ms=CLIENT_SETTINGS["heartbeat_ms"],
            session_timeout_ms=CLIENT_SETTINGS["session_ms"],
        )
        for i in range(count)
    ]
    # Connected and knowing the topic before the clock starts: a kafka-python leader that assigns
    # before its metadata has the topic rejoins at once and then sometimes stalls after SyncGroup
    # (tests/support/kafka_python.py); Java and librdkafka clients wait for metadata themselves.
    for consumer in consumers:
        while not consumer.partitions_for_topic(topic):
            time.sleep(0.02)

    def poll(index: int) -> None:
        # The callbacks of kafka-python 3 were seen to miss the final generation's assignment (the
        # consumers' last callbacks showed a 9-member split of an older generation while the server
        # and assignment() agreed on the 10-member one), so the client's own assignment() is read.
        consumers[index].poll(timeout_ms=int(POLL_S * 1000))
        formation.update(index, frozenset(tp.partition for tp in consumers[index].assignment()))

    try:
        return _threaded(
            consumers,
            formation,
            lambda i: consumers[i].subscribe([topic]),
            poll,
        )
    finally:
        for consumer in consumers:
            consumer.close(autocommit=False)


def form_confluent(bootstrap: str, topic: str, group: str, count: int) -> float:
    from confluent_kafka import Consumer

    formation = Formation(count)
    consumers = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": f"{group}-{i}",
                "enable.auto.commit": False,
                "heartbeat.interval.ms": CLIENT_SETTINGS["heartbeat_ms"],
                "session.timeout.ms": CLIENT_SETTINGS["session_ms"],
                "partition.assignment.strategy": "range",
            }
        )
        for i in range(count)
    ]

    def subscribe(index: int) -> None:
        consumers[index].subscribe(
            [topic],
            on_assign=lambda _c, parts: formation.update(index, frozenset(p.partition for p in parts)),
            on_revoke=lambda _c, parts: formation.revoke(index, frozenset(p.partition for p in parts)),
        )

    try:
        return _threaded(consumers, formation, subscribe, lambda i: _poll_confluent(consumers[i]))
    finally:
        for consumer in consumers:
            consumer.close()


def _poll_confluent(consumer: Any) -> None:
    consumer.poll(POLL_S)  # serves the rebalance callbacks; no records are produced


async def _form_aiokafka(bootstrap: str, topic: str, group: str, count: int) -> float:
    from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
    from aiokafka.abc import ConsumerRebalanceListener  # type: ignore[import-untyped]

    formation = Formation(count)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def __init__(self, index: int) -> None:
            self.index = index

        async def on_partitions_revoked(self, revoked: Any) -> None:
            formation.revoke(self.index, frozenset(tp.partition for tp in revoked))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            formation.update(self.index, frozenset(tp.partition for tp in assigned))

    consumers = [
        AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=f"{group}-{i}",
            enable_auto_commit=False,
            heartbeat_interval_ms=CLIENT_SETTINGS["heartbeat_ms"],
            session_timeout_ms=CLIENT_SETTINGS["session_ms"],
        )
        for i in range(count)
    ]

    async def member(index: int) -> None:
        consumer = consumers[index]
        consumer.subscribe([topic], listener=Listener(index))
        deadline = time.monotonic() + FORMATION_TIMEOUT_S
        while not formation.done.is_set() and time.monotonic() < deadline:
            await consumer.getmany(timeout_ms=int(POLL_S * 1000))

    try:
        await asyncio.gather(*(consumer.start() for consumer in consumers))
        formation.started = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*(member(i) for i in range(count))), FORMATION_TIMEOUT_S + 5)
        return formation.wait()
    finally:
        await asyncio.gather(*(consumer.stop() for consumer in consumers), return_exceptions=True)


def form_aiokafka(bootstrap: str, topic: str, group: str, count: int) -> float:
    return asyncio.run(_form_aiokafka(bootstrap, topic, group, count))


FORMERS: dict[str, Callable[[str, str, str, int], float]] = {
    "kafka-python": form_kafka_python,
    "confluent": form_confluent,
    "aiokafka": form_aiokafka,
}


def metrics_address(server: BenchServer) -> str:
    """The server's other loopback listener (the metrics HTTP one), found through /proc."""
    inodes = set()
    for fd in Path(f"/proc/{server.pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    kafka_port = int(server.bootstrap.rpartition(":")[2])
    for line in Path(f"/proc/{server.pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        port = int(local.rpartition(":")[2], 16)
        if state == "0A" and inode in inodes and port != kafka_port:
            return f"127.0.0.1:{port}"
    raise RuntimeError("the server's metrics listener was not found")


@dataclass(frozen=True)
class ServerView:
    rebalances: int
    join_ms: float
    sync_ms: float


def server_view(metrics: str, group: str) -> ServerView:
    with urllib.request.urlopen(f"http://{metrics}/v1/groups/{group}", timeout=10) as response:
        described: dict[str, Any] = json.load(response)
    # The consumers have closed by now: their LeaveGroups' rebalance is not part of the formation.
    formation = [r for r in described["history"] if r["trigger"] != "member_left"]
    stable = [r for r in formation if r["outcome"] == "stable"]
    last = stable[-1] if stable else {"join_ms": None, "sync_ms": None}
    return ServerView(
        rebalances=len(formation),
        join_ms=float("nan") if last["join_ms"] is None else float(last["join_ms"]),
        sync_ms=float("nan") if last["sync_ms"] is None else float(last["sync_ms"]),
    )


def _measure_client(
    server: BenchServer, metrics: str, client: str, delay: int, options: argparse.Namespace
) -> list[Measurement]:
    topic = f"formation-{client}"
    wire.create_topic(server.bootstrap, topic, PARTITIONS)
    count = options.group_formation_consumers
    formed: list[float] = []
    views: list[ServerView] = []
    for run_number in range(options.runs):
        group = f"formation-{client}-{delay}-{run_number}"
        try:
            formed.append(FORMERS[client](server.bootstrap, topic, group, count))
        except TimeoutError as error:
            print(f"  {client}: {error}", flush=True)
            formed.append(float("inf"))
        views.append(server_view(metrics, group))
        print(
            f"  delay {delay} ms, {client}, run {run_number + 1}: formed in {formed[-1]:.3f} s "
            f"({views[-1].rebalances} rebalances; last join {views[-1].join_ms:.0f} ms, "
            f"sync {views[-1].sync_ms:.0f} ms)",
            flush=True,
        )
    label = f"{client}, delay {delay} ms"
    target = " (target < 0.5)" if delay == 300 else ""
    return [
        Measurement(f"{label}: formed{target}", "s", tuple(formed)),
        Measurement(f"{label}: rebalances", "count", tuple(float(v.rebalances) for v in views)),
        Measurement(f"{label}: last join phase", "ms", tuple(v.join_ms for v in views)),
        Measurement(f"{label}: last sync phase", "ms", tuple(v.sync_ms for v in views)),
    ]


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    del server  # each delay needs its own server
    measurements: list[Measurement] = []
    for delay in options.group_formation_delays:
        with running_kcoord({"group.initial.rebalance.delay.ms": str(delay)}) as delayed:
            metrics = metrics_address(delayed)
            for client in options.group_formation_clients:
                measurements += _measure_client(delayed, metrics, client, delay, options)
    return measurements
