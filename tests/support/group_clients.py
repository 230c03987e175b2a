"""Consumer-group members as subprocesses, for real-client group tests: start, watch, close, SIGKILL.

Every member is a *driver*: a real client in its own process that reports on stdout, one JSON
object per line, what it was assigned, revoked, consumed and committed (see
tests/groups/consumer_driver.py for the protocol). Python clients and kafkajs speak it natively;
``kcat -G`` is translated from its ``-J`` message envelopes and its "% Group ... rebalanced" lines.
The harness here waits for an assignment that covers every partition exactly once and collects
what every member consumed, so a test reads as the scenario it pins.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kcoord.protocol.api_keys import ApiKey
from tests.support.batches import build_batch
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic, produce
from tests.support.server import KcoordProcess

REPO = Path(__file__).resolve().parents[2]
PYTHON_DRIVER = REPO / "tests" / "groups" / "consumer_driver.py"
NODE_DIR = REPO / "tests" / "clients" / "node"
NODE_DRIVER = NODE_DIR / "consumer_driver.js"
REPO_KP2_PYTHON = REPO / ".venv-kp2" / "bin" / "python"
KCAT = shutil.which("kcat") or "/usr/bin/kcat"
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000
#: Every Group made since the last judgement of client errors (tests/support/client_errors.py).
GROUPS: list[Group] = []
#: One line per group whose members retried a commit the server refused for a rebalance (summary).
COMMIT_RETRIES: list[str] = []
#: The OffsetCommit answers that make a confluent driver commit again (tests/groups/consumer_driver.py).
REFUSED_IN_REBALANCE = frozenset({"illegal_generation", "rebalance_in_progress"})


def kp2_python() -> str:
    """The interpreter with kafka-python 2.0.2: $KCOORD_KP2_PYTHON, else the repo's .venv-kp2."""
    configured = os.environ.get("KCOORD_KP2_PYTHON")
    if configured:
        return configured
    assert REPO_KP2_PYTHON.exists(), (
        "kafka-python 2.0.2 is missing: run scripts/test.sh or set KCOORD_KP2_PYTHON"
    )
    return str(REPO_KP2_PYTHON)


@dataclass(frozen=True)
class ClientKind:
    """Which real client a driver runs and with which assignor; ``name`` is the pytest id."""

    name: str
    client: str  # kafka-python | kafka-python-2 | confluent | aiokafka | kcat | kafkajs
    assignor: str = "range"
    group_protocol: str = "classic"  # "consumer": KIP-848 (confluent only)

    def command(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        client_id: str,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        instance_id: str | None = None,
    ) -> list[str]:
        if self.client == "kcat":
            return kcat_command(bootstrap, topic, group, self.assignor, session_timeout_ms, client_id)
        if self.client == "kafkajs":
            assert (NODE_DIR / "node_modules" / "kafkajs").exists(), "run npm install in tests/clients/node"
            command = ["node", str(NODE_DRIVER)]
        else:
            python = kp2_python() if self.client == "kafka-python-2" else sys.executable
            library = "kafka-python" if self.client == "kafka-python-2" else self.client
            command = [python, str(PYTHON_DRIVER), "--client", library, "--assignor", self.assignor]
            if instance_id:
                command += ["--instance-id", instance_id]
            if self.group_protocol != "classic":
                command += ["--group-protocol", self.group_protocol]
        options = {
            "--bootstrap": bootstrap,
            "--topic": topic,
            "--group": group,
            "--session-timeout-ms": str(session_timeout_ms),
            "--heartbeat-ms": str(HEARTBEAT_MS),
            "--client-id": client_id,
        }
        return command + [part for pair in options.items() for part in pair]


def kcat_command(
    bootstrap: str, topic: str, group: str, assignor: str, session_timeout_ms: int, client_id: str
) -> list[str]:
    settings = {
        "session.timeout.ms": session_timeout_ms,
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "true",
        "auto.commit.interval.ms": 100,
        "partition.assignment.strategy": assignor,
        "client.id": client_id,
    }
    command = [KCAT, "-b", bootstrap, "-G", group, "-J", "-u"]
    for name, value in settings.items():
        command += ["-X", f"{name}={value}"]
    return [*command, topic]


_KCAT_REBALANCE = re.compile(r"% Group \S+ rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)")
_KCAT_PARTITION = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class FaultWindow:
    """A fault a test caused: monotonic start and end, and the error codes it admits beyond retriable ones."""

    start: float
    end: float
    also: frozenset[int] = frozenset()


@dataclass
class Driver:
    """One member process; its events accumulate as they arrive (thread-safe enough for reads)."""

    name: str
    kind: ClientKind
    proc: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    assignment: frozenset[int] | None = None
    consumed: list[tuple[int, int]] = field(default_factory=list)
    committed: dict[int, int] = field(default_factory=dict)

    def start_readers(self) -> None:
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                self.stderr.append("stdout: " + line.rstrip())
                continue
            if self.kind.client == "kcat":
                event = {"event": "consumed", "records": [[event["partition"], event["offset"]]]}
            self.record(event)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())
            if self.kind.client != "kcat":
                continue
            match = _KCAT_REBALANCE.search(line)
            if match:
                partitions = sorted(int(p) for p in _KCAT_PARTITION.findall(match.group(2)))
                if match.group(1) == "assigned":
                    self.record({"event": "assigned", "partitions": partitions, "generation": None})
                else:
                    self.record({"event": "revoked", "partitions": partitions})

    def record(self, event: dict[str, Any]) -> None:
        event["at"] = time.monotonic()
        kind = event["event"]
        if kind == "assigned":
            self.assignment = frozenset(event["partitions"])
        elif kind == "revoked":
            self.assignment = frozenset((self.assignment or frozenset()) - set(event["partitions"]))
        elif kind == "consumed":
            self.consumed.extend((int(p), int(o)) for p, o in event["records"])
        elif kind == "committed":
            for partition, offset in event["offsets"].items():
                self.committed[int(partition)] = int(offset)
        self.events.append(event)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def of_kind(self, kind: str, since: float = 0.0) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["event"] == kind and e["at"] >= since]

    def close(self, timeout: float = 30.0) -> None:
        """Graceful close: the client leaves the group (kcat on SIGTERM, the others on ``close``)."""
        if not self.alive:
            return
        if self.kind.client == "kcat":
            self.proc.send_signal(signal.SIGTERM)
        else:
            assert self.proc.stdin is not None
            self.proc.stdin.write("close\n")
            self.proc.stdin.flush()
        self.proc.wait(timeout)
        self.assignment = None

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no final commit; the coordinator must notice by the session timeout."""
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.assignment = None

    def describe(self) -> str:
        tail = "\n    ".join(self.stderr[-15:])
        shown = [e for e in self.events if e["event"] != "consumed"][-10:]
        return f"{self.name} alive={self.alive} assignment={self.assignment} events={shown}\n    {tail}"


class Group:
    """The drivers of one group on one topic; started, stopped and inspected together."""

    def __init__(self, server: KcoordProcess, topic: str, group: str, partitions: int) -> None:
        self.server = server
        self.topic = topic
        self.group = group
        self.partitions = partitions
        self.drivers: list[Driver] = []
        #: Members taken out of ``drivers`` (replaced); what they consumed still counts.
        self.retired: list[Driver] = []
        #: The faults a test causes; retriable errors (and each window's ``also``) are allowed in them.
        self.fault_windows: list[FaultWindow] = []
        self._numbers = 0
        GROUPS.append(self)

    @contextmanager
    def fault_window(self, also: Iterable[int] = ()) -> Iterator[None]:
        """Mark the block as a fault (a restart, an outage, a cut): clients may report retriable
        errors in it, and the codes in ``also`` (client-local ones such as SERVER_UNREACHABLE in
        tests/support/client_errors.py). End the block at a positive sign of recovery."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.fault_windows.append(FaultWindow(start, time.monotonic(), frozenset(also)))

    @property
    def all_drivers(self) -> list[Driver]:
        return [*self.drivers, *self.retired]

    def start(
        self,
        kind: ClientKind,
        *,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        instance_id: str | None = None,
    ) -> Driver:
        self._numbers += 1
        name = f"{kind.name}-{self._numbers}"
        command = kind.command(
            self.server.bootstrap,
            self.topic,
            self.group,
            client_id=name,
            session_timeout_ms=session_timeout_ms,
            instance_id=instance_id,
        )
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            cwd=NODE_DIR if kind.client == "kafkajs" else None,
        )
        driver = Driver(name, kind, proc)
        driver.start_readers()
        self.drivers.append(driver)
        return driver

    def start_many(self, kinds: Iterable[ClientKind]) -> list[Driver]:
        return [self.start(kind) for kind in kinds]

    @property
    def live(self) -> list[Driver]:
        return [d for d in self.drivers if d.alive]

    def stop_all(self) -> None:
        for driver in self.all_drivers:
            driver.kill()

    def diagnose(self) -> str:
        server_tail = "\n".join(self.server.raw_log[-25:])
        return "\n".join(d.describe() for d in self.drivers) + "\nserver log tail:\n" + server_tail

    def is_balanced(self, members: Sequence[Driver]) -> bool:
        """Every member owns at least one partition, no partition twice, every partition once."""
        owned: list[int] = []
        for driver in members:
            if not driver.alive or not driver.assignment:
                return False
            owned.extend(driver.assignment)
        return sorted(owned) == list(range(self.partitions))

    def wait_balanced(
        self, members: Sequence[Driver] | None = None, *, timeout: float = 40.0, settle: float = 1.0
    ) -> float:
        """Wait until the live members hold every partition exactly once for ``settle`` seconds.

        Returns the monotonic time at which the final balanced state was first seen.
        """
        deadline = time.monotonic() + timeout
        since: float | None = None
        while time.monotonic() < deadline:
            current = list(members) if members is not None else self.live
            if self.is_balanced(current):
                last_assignments = [d.of_kind("assigned")[-1] for d in current if d.of_kind("assigned")]
                balanced_at = max(float(event["at"]) for event in last_assignments)
                since = since or time.monotonic()
                if time.monotonic() - since >= settle:
                    return balanced_at
            else:
                since = None
            time.sleep(0.05)
        raise AssertionError(
            f"group {self.group} never balanced over {self.partitions} partitions:\n{self.diagnose()}"
        )

    def committed_on_server(self) -> dict[int, int]:
        """Each partition's committed offset as the coordinator answers OffsetFetch (absent: none)."""
        body = {"groups": [{"group_id": self.group, "topics": None}], "require_stable": False}
        with RawClient(self.server.host, self.server.port, client_id="group-test-offsets") as raw:
            answer = raw.call(ApiKey.OFFSET_FETCH, 8, body)
        return {
            int(p.partition_index): int(p.committed_offset)
            for entry in answer.groups
            for topic in entry.topics
            if topic.name == self.topic
            for p in topic.partitions
            if int(p.committed_offset) >= 0
        }

    def wait_committed_at(self, ends: dict[int, int], timeout: float = 30.0) -> None:
        """Wait until the coordinator holds a commit at ``ends`` for every partition: the positive sign
        that no member can consume anything again (a re-read starts from a committed offset)."""
        wait_until(lambda: self.committed_on_server() == ends, timeout, f"{self.group} committed at {ends}")

    def proven_commit_retries(self) -> int:
        """How many commits the members retried (``commit_retry``), each proven from the server's side.

        A driver retries only after the group refused its commit for a rebalance, so every member's
        retries number at most the OffsetCommit requests the server answered with ILLEGAL_GENERATION
        or REBALANCE_IN_PROGRESS for that client (its debug ``request.answered_with_errors`` lines;
        the server must run at ``kcoord.log.level=debug``). Fails naming the member otherwise.
        """
        refused: Counter[str] = Counter(
            str(event.get("client_id"))
            for event in self.server.events("request.answered_with_errors")
            if event.get("api") == "OffsetCommit" and set(event.get("errors", ())) & REFUSED_IN_REBALANCE
        )
        retries = {d.name: len(d.of_kind("commit_retry")) for d in self.all_drivers}
        unproven = {name: n for name, n in retries.items() if n > refused[name]}
        assert not unproven, (
            f"commit retries without as many OffsetCommits refused for a rebalance: {unproven}, "
            f"refused {dict(refused)}"
        )
        total = sum(retries.values())
        if total:
            shown = ", ".join(f"{name} x{n}" for name, n in retries.items() if n)
            COMMIT_RETRIES.append(f"{self.group}: {shown} (server refused {sum(refused.values())})")
        return total

    def wait_consumed(
        self, expected: set[tuple[int, int]], *, timeout: float = 30.0
    ) -> Counter[tuple[int, int]]:
        """Wait until the members together consumed every expected (partition, offset); returns the counts."""
        deadline = time.monotonic() + timeout
        while True:
            counts = Counter(pair for d in self.all_drivers for pair in list(d.consumed))
            if expected <= set(counts):
                return counts
            if time.monotonic() >= deadline:
                missing = sorted(expected - set(counts))
                raise AssertionError(
                    f"{len(missing)} messages never consumed, e.g. {missing[:5]}\n{self.diagnose()}"
                )
            time.sleep(0.1)


def assert_exactly_once(counts: Counter[tuple[int, int]], expected: set[tuple[int, int]]) -> None:
    twice = sorted(pair for pair, n in counts.items() if n > 1)
    assert not twice, f"{len(twice)} messages consumed more than once, e.g. {twice[:5]}"
    assert set(counts) == expected, sorted(set(counts) ^ expected)[:5]


def create_and_fill(
    server: KcoordProcess, topic: str, partitions: int, per_partition: int
) -> set[tuple[int, int]]:
    """Create ``topic`` and append ``per_partition`` records to each partition; returns the pairs."""
    with RawClient(server.host, server.port, client_id="group-test-setup") as raw:
        assert create_topic(raw, topic, partitions) == 0
    return append(server, topic, range(partitions), per_partition)


def append(server: KcoordProcess, topic: str, partitions: Iterable[int], count: int) -> set[tuple[int, int]]:
    """Append ``count`` records to each partition; returns the (partition, offset) pairs written."""
    written: set[tuple[int, int]] = set()
    now_ms = int(time.time() * 1000)
    with RawClient(server.host, server.port, client_id="group-test-producer") as raw:
        for partition in partitions:
            records = [(f"k{partition}".encode(), f"p{partition}-{i}".encode()) for i in range(count)]
            error, base = produce(raw, topic, partition, build_batch(records, timestamp_ms=now_ms))
            assert error == 0, (topic, partition, error)
            written.update((partition, base + i) for i in range(count))
    return written


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``condition`` until true; returns when it became true (monotonic) or fails naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def end_offsets(records: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Each partition's next offset after the highest of ``records`` (what a member commits at the end)."""
    ends: dict[int, int] = {}
    for partition, offset in records:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def heartbeats_answered(server: KcoordProcess) -> Counter[str]:
    """The Heartbeat requests the server answered so far, by error name (its ``kcoord_requests_total``)."""
    with urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kcoord_requests_total" and sample.labels.get("api") == "Heartbeat":
                counts[sample.labels["error"]] += int(sample.value)
    return counts


def wait_heartbeat_rounds(server: KcoordProcess, members: int, rounds: int, timeout: float) -> Counter[str]:
    """Wait until ``members * rounds`` more heartbeats were answered NONE than when called: the positive
    sign that the members have each heard back from the coordinator since (a pending rebalance is
    answered REBALANCE_IN_PROGRESS instead); the answers counted since the call, by error name."""
    before = heartbeats_answered(server)

    def since() -> Counter[str]:
        now = heartbeats_answered(server)
        now.subtract(before)
        return now

    wanted = members * rounds
    wait_until(lambda: since()["NONE"] >= wanted, timeout, f"{wanted} heartbeats answered")
    return since()
