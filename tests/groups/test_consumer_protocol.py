"""KIP-848 consumer groups with confluent-kafka (``group.protocol=consumer``) over real sockets.

The members are subprocesses (tests/groups/consumer_driver.py) that commit after every batch and
on revocation; the coordinator computes the assignment and they reconcile through
ConsumerGroupHeartbeat.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from kcoord.cli.main import main
from tests.support.batches import build_batch
from tests.support.client_errors import SERVER_UNREACHABLE
from tests.support.group_clients import (
    ClientKind,
    Driver,
    Group,
    append,
    assert_exactly_once,
    create_and_fill,
    wait_until,
)
from tests.support.raw_client import RawClient
from tests.support.raw_ops import produce
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

HEARTBEAT_MS = 500
SETTINGS = {
    "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "group.consumer.session.timeout.ms": "6000",
}
UNIFORM = ClientKind("confluent-848", "confluent", assignor="uniform", group_protocol="consumer")
RANGE = ClientKind("confluent-848-range", "confluent", assignor="range", group_protocol="consumer")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[KcoordProcess]:
    """A kcoord with a short consumer-group heartbeat interval and session timeout."""
    process = KcoordProcess(tmp_path / "data", SETTINGS).start()
    try:
        yield process
    finally:
        process.kill()


def _group(server: KcoordProcess, name: str, partitions: int) -> Group:
    return Group(server, topic=f"t-{name}", group=f"g-{name}", partitions=partitions)


def _wait_committed(drivers: list[Driver], timeout: float = 20.0) -> None:
    """Every consumed record of these members is covered by one of their commits."""

    def covered() -> bool:
        for driver in drivers:
            last: dict[int, int] = {}
            for partition, offset in list(driver.consumed):
                last[partition] = max(last.get(partition, -1), offset)
            if any(driver.committed.get(p, -1) <= o for p, o in last.items()):
                return False
        return True

    wait_until(covered, timeout, "commits of everything consumed")


@pytest.mark.parametrize(
    ("kind", "size", "partitions"),
    [(UNIFORM, 3, 6), (RANGE, 3, 6), (UNIFORM, 10, 30)],
    ids=["uniform-3-on-6", "range-3-on-6", "uniform-10-on-30"],
)
def test_form_join_leave_and_crash_consume_every_message_once(
    server: KcoordProcess, kind: ClientKind, size: int, partitions: int
) -> None:
    """N members on P partitions: forming, a join, a leave and a SIGKILL; each message is consumed once."""
    members = _group(server, f"lifecycle-{kind.assignor}-{size}", partitions)
    every = range(partitions)
    try:
        expected = create_and_fill(server, members.topic, partitions, 20)
        first = members.start_many([kind] * size)
        members.wait_balanced(first, timeout=90.0)
        members.wait_consumed(expected, timeout=60.0)
        # A join.
        joiner = members.start(kind)
        members.wait_balanced([*first, joiner], timeout=90.0)
        expected |= append(server, members.topic, every, 10)
        members.wait_consumed(expected, timeout=60.0)
        # A leave.
        first[0].close()
        members.wait_balanced([*first[1:], joiner], timeout=90.0)
        expected |= append(server, members.topic, every, 10)
        members.wait_consumed(expected, timeout=60.0)
        # A crash, once everything consumed is committed: its partitions come back after the session.
        _wait_committed(members.live)
        first[1].kill()
        members.wait_balanced([*first[2:], joiner], timeout=90.0)
        expected |= append(server, members.topic, every, 10)
        counts = members.wait_consumed(expected, timeout=60.0)
        assert_exactly_once(counts, expected)
    finally:
        members.stop_all()


class SteadyProducer:
    """One record per partition every ``interval`` seconds, bounded in count and time."""

    def __init__(self, server: KcoordProcess, topic: str, partitions: int, interval: float = 0.05) -> None:
        self._server = server
        self._topic = topic
        self._partitions = partitions
        self._interval = interval
        self._stop = threading.Event()
        self.written: set[tuple[int, int]] = set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        deadline = time.monotonic() + 60
        with RawClient(self._server.host, self._server.port, client_id="steady-producer") as raw:
            for _ in range(2_000):
                if self._stop.is_set() or time.monotonic() > deadline:
                    return
                for partition in range(self._partitions):
                    batch = build_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))
                    error, base = produce(raw, self._topic, partition, batch)
                    if error == 0:
                        self.written.add((partition, base))
                time.sleep(self._interval)


def _consumed_times(drivers: list[Driver]) -> dict[int, list[float]]:
    times: dict[int, list[float]] = {}
    for driver in drivers:
        for event in driver.of_kind("consumed"):
            for partition, _offset in event["records"]:
                times.setdefault(int(partition), []).append(float(event["at"]))
    return {p: sorted(ts) for p, ts in times.items()}


def _longest_gap(times: list[float], start: float, end: float) -> float:
    window = [t for t in times if start <= t <= end]
    points = [start, *window, end]
    return max(b - a for a, b in itertools.pairwise(points))


def test_join_pauses_only_the_partitions_that_move(server: KcoordProcess) -> None:
    """While a member joins, partitions that stay are consumed on; the longest pauses are reported."""
    members = _group(server, "pauses", 6)
    try:
        create_and_fill(server, members.topic, 6, 1)
        first = members.start_many([UNIFORM, UNIFORM])
        members.wait_balanced(first)
        before = {d.name: frozenset(d.assignment or ()) for d in first}
        with SteadyProducer(server, members.topic, 6) as producer:
            time.sleep(2.0)
            joined_at = time.monotonic()
            joiner = members.start(UNIFORM)
            members.wait_balanced([*first, joiner])
            time.sleep(2.0)
            ended_at = time.monotonic()
        after = {d.name: frozenset(d.assignment or ()) for d in first}
        unmoved = {p for name in before for p in before[name] & after[name]}
        moved = set(range(6)) - unmoved
        times = _consumed_times([*first, joiner])
        unmoved_pause = max(_longest_gap(times.get(p, []), joined_at, ended_at) for p in unmoved)
        moved_pause = max(_longest_gap(times.get(p, []), joined_at, ended_at) for p in moved)
        print(
            f"\nKIP-848 join, 2->3 members on 6 partitions (heartbeat {HEARTBEAT_MS} ms): "
            f"longest pause unmoved {unmoved_pause * 1000:.0f} ms ({len(unmoved)} partitions), "
            f"moved {moved_pause * 1000:.0f} ms ({len(moved)} partitions)"
        )
        assert len(moved) == 2 and len(unmoved) == 4, (before, after)
        # A loaded machine stretches everything; the point is that the unmoved never stop for a rebalance.
        assert unmoved_pause < 4 * HEARTBEAT_MS / 1000 + 1.0
        counts: Counter[tuple[int, int]] = members.wait_consumed(producer.written)
        assert not [pair for pair, n in counts.items() if n > 1 and pair in producer.written]
    finally:
        members.stop_all()


def test_members_keep_their_assignment_across_a_server_kill(server: KcoordProcess) -> None:
    """SIGKILL and restart kcoord: the group and its assignment are replayed; nobody loses a partition."""
    members = _group(server, "restart", 6)
    try:
        expected = create_and_fill(server, members.topic, 6, 20)
        drivers = members.start_many([UNIFORM, UNIFORM, UNIFORM])
        members.wait_balanced(drivers)
        members.wait_consumed(expected)
        _wait_committed(drivers)
        before = {d.name: d.assignment for d in drivers}
        restarted_at = time.monotonic()
        # The server is down: the fault lasts until the members consumed what came after.
        with members.fault_window(also=SERVER_UNREACHABLE):
            server.restart()
            more = append(server, members.topic, range(6), 10)
            counts = members.wait_consumed(expected | more, timeout=60.0)
        assert_exactly_once(counts, expected | more)
        assert {d.name: d.assignment for d in drivers} == before
        revoked = [e for d in drivers for e in d.of_kind("revoked", since=restarted_at)]
        assert not revoked, revoked
    finally:
        members.stop_all()


def test_admin_client_describes_and_lists_consumer_groups(
    server: KcoordProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """confluent-kafka's AdminClient and ``kcoord groups describe`` see type, state, members and
    assignments; ListGroups lists by type."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    members = _group(server, "admin", 6)
    classic = _group(server, "admin-classic", 6)
    try:
        create_and_fill(server, members.topic, 6, 1)
        create_and_fill(server, classic.topic, 6, 1)
        drivers = members.start_many([UNIFORM, UNIFORM])
        classic_driver = classic.start(ClientKind("confluent", "confluent", "range"))
        members.wait_balanced(drivers)
        classic.wait_balanced([classic_driver])
        admin = AdminClient({"bootstrap.servers": server.bootstrap})

        described = admin.describe_consumer_groups([members.group])[members.group].result(timeout=15)
        assert described.type == ConsumerGroupType.CONSUMER
        assert described.state == ConsumerGroupState.STABLE
        assert {m.client_id for m in described.members} == {d.name for d in drivers}
        assigned = sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions)
        assert assigned == list(range(6))

        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=15)
        assert {g.group_id for g in listed.valid} == {members.group}
        assert all(g.type == ConsumerGroupType.CONSUMER for g in listed.valid)
        everything = admin.list_consumer_groups().result(timeout=15)
        types = {g.group_id: g.type for g in everything.valid}
        assert types[members.group] == ConsumerGroupType.CONSUMER
        assert types[classic.group] == ConsumerGroupType.CLASSIC

        capsys.readouterr()
        assert main(["groups", "describe", members.group, "--bootstrap", server.bootstrap, "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["type"] == "consumer" and shown["state"] == "Stable"
        assert sorted(row["partition"] for row in shown["partitions"] if row["consumer_id"]) == list(range(6))
        assert main(["groups", "describe", classic.group, "--bootstrap", server.bootstrap, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["protocol_type"] == "consumer"
    finally:
        members.stop_all()
        classic.stop_all()


def test_upgrade_of_an_empty_classic_group_keeps_its_offsets(server: KcoordProcess) -> None:
    """A classic group consumes and leaves; KIP-848 members of the same id read only what came after,
    while another classic group on the same topic keeps consuming beside them."""
    classic_kind = ClientKind("confluent", "confluent", "range")
    old = _group(server, "upgrade", 6)
    beside = Group(server, topic=old.topic, group="g-upgrade-beside", partitions=6)
    upgraded = Group(server, topic=old.topic, group=old.group, partitions=6)
    try:
        first = create_and_fill(server, old.topic, 6, 10)
        classic_member = old.start(classic_kind)
        neighbour = beside.start(classic_kind)
        old.wait_consumed(first)
        _wait_committed([classic_member])
        classic_member.close()
        later = append(server, old.topic, range(6), 10)
        drivers = upgraded.start_many([UNIFORM, UNIFORM])
        upgraded.wait_balanced(drivers)
        counts = upgraded.wait_consumed(later)
        assert_exactly_once(counts, later)
        beside.wait_balanced([neighbour])
        assert_exactly_once(beside.wait_consumed(first | later), first | later)
    finally:
        old.stop_all()
        beside.stop_all()
        upgraded.stop_all()


def test_regex_subscription_picks_up_a_topic_created_later(server: KcoordProcess) -> None:
    """librdkafka's regex subscription is resolved by the coordinator, again when a topic appears."""
    from confluent_kafka import Consumer

    first = {("rx-a", p, o) for p, o in create_and_fill(server, "rx-a", 2, 5)}
    create_and_fill(server, "rx-other", 2, 5)
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "g-regex",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["^rx-[ab]$"])
        got: list[tuple[str, int, int]] = []
        later: set[tuple[str, int, int]] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (len(got) < len(first) + len(later) or not later):
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append((str(message.topic()), int(message.partition()), int(message.offset())))
            if not later and first <= set(got):
                later = {("rx-b", p, o) for p, o in create_and_fill(server, "rx-b", 2, 5)}
        assert later, "the first topic's records never all arrived"
        assert sorted(got) == sorted(first | later)
    finally:
        consumer.close()
