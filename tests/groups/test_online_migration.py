"""Online migration with real clients: a live group rolled from the classic to the consumer protocol and back.

Three confluent-kafka consumers with ``group.protocol=classic`` consume while records flow; they are
replaced one by one by consumers with ``group.protocol=consumer`` (the first one's heartbeat upgrades
the live group; the classic members go on inside the consumer group until they are gone), then
rolled back one by one (the last consumer-protocol member's leave downgrades the group). The
members commit synchronously after every batch and on revocation, so every record written is
consumed exactly once across all of it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient

from kcoord.cli import main
from tests.groups.test_consumer_protocol import SteadyProducer, _consumed_times, _longest_gap
from tests.support import kafka_python_stall
from tests.support.client_errors import SERVER_UNREACHABLE
from tests.support.group_clients import (
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    ClientKind,
    Driver,
    Group,
    append,
    assert_exactly_once,
    create_and_fill,
    wait_until,
)
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

PARTITIONS = 6
CLASSIC = ClientKind("confluent-classic", "confluent", assignor="range")
COOPERATIVE = ClientKind("confluent-cooperative", "confluent", assignor="cooperative-sticky")
CONSUMER = ClientKind("confluent-848", "confluent", assignor="uniform", group_protocol="consumer")
SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.migration.policy": "bidirectional",
    # The kafka-python group forms through kafka_python_stall.form, which reads group.sync_answered.
    "kcoord.log.level": "debug",
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[KcoordProcess]:
    process = KcoordProcess(tmp_path / "data", SETTINGS).start()
    try:
        yield process
    finally:
        process.kill()


def _group_type(server: KcoordProcess, group: str) -> ConsumerGroupType:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    listed = admin.list_consumer_groups().result(timeout=15)
    types: dict[str, ConsumerGroupType] = {g.group_id: g.type for g in listed.valid}
    return types[group]


def _roll(members: Group, old: list[Driver], kind: ClientKind) -> list[Driver]:
    """Replace each member of ``old`` by a new member of ``kind``, one at a time, waiting for the
    group to hold every partition exactly once in between."""
    live = list(old)
    rolled: list[Driver] = []
    for leaving in old:
        joining = members.start(kind)
        rolled.append(joining)
        members.wait_balanced([*live, joining], timeout=90.0)
        leaving.close()
        live = [d for d in live if d is not leaving] + [joining]
        members.wait_balanced(live, timeout=90.0)
    return rolled


@pytest.mark.parametrize("classic_kind", [CLASSIC, COOPERATIVE], ids=["eager", "cooperative"])
# Members join and leave while others consume and commit: a commit that races a generation (classic)
# or epoch (consumer protocol) bump is refused with the code Kafka uses, and the member moves on.
@pytest.mark.client_errors_allow("ILLEGAL_GENERATION", "STALE_MEMBER_EPOCH")
@pytest.mark.slow
def test_a_live_group_rolls_to_the_consumer_protocol_and_back(
    server: KcoordProcess, classic_kind: ClientKind
) -> None:
    """Classic -> consumer (upgrade on the first heartbeat) -> classic (downgrade on the last
    leave) while records flow: nothing lost, nothing consumed twice, and the group's type follows."""
    name = classic_kind.assignor
    members = Group(server, topic=f"t-migrate-{name}", group=f"g-migrate-{name}", partitions=PARTITIONS)
    try:
        expected = create_and_fill(server, members.topic, PARTITIONS, 20)
        classic = members.start_many([classic_kind] * 3)
        members.wait_balanced(classic, timeout=90.0)
        members.wait_consumed(expected, timeout=60.0)
        assert _group_type(server, members.group) == ConsumerGroupType.CLASSIC
        with SteadyProducer(server, members.topic, PARTITIONS, interval=0.1) as producer:
            started = time.monotonic()
            upgraded = _roll(members, classic, CONSUMER)
            assert _group_type(server, members.group) == ConsumerGroupType.CONSUMER
            halfway = time.monotonic()
            downgraded = _roll(members, upgraded, classic_kind)
            wait_until(
                lambda: _group_type(server, members.group) == ConsumerGroupType.CLASSIC,
                30.0,
                "the group to be classic again",
            )
            ended = time.monotonic()
        expected |= producer.written
        counts = members.wait_consumed(expected, timeout=60.0)
        assert_exactly_once(counts, expected)
        times = _consumed_times(members.drivers)
        up = max(_longest_gap(times.get(p, []), started, halfway) for p in range(PARTITIONS))
        down = max(_longest_gap(times.get(p, []), halfway, ended) for p in range(PARTITIONS))
        print(
            f"\nroll of 3 {name} members on {PARTITIONS} partitions: "
            f"classic->consumer {halfway - started:.1f} s "
            f"(longest pause of a partition {up * 1000:.0f} ms), consumer->classic {ended - halfway:.1f} s "
            f"(longest pause {down * 1000:.0f} ms)"
        )
        assert all(d.alive for d in downgraded)
    finally:
        members.stop_all()


def test_kafka_python_members_live_on_inside_an_upgraded_group(server: KcoordProcess) -> None:
    """Two kafka-python classic members, then a confluent-kafka consumer-protocol member joins
    (upgrade): the three share the partitions, the kafka-python members through JoinGroup/SyncGroup
    inside the consumer group; when the consumer-protocol member leaves the group is classic again."""
    members = Group(server, topic="t-migrate-kp", group="g-migrate-kp", partitions=PARTITIONS)
    kafka_python = ClientKind("kafka-python", "kafka-python", assignor="range")
    try:
        expected = create_and_fill(server, members.topic, PARTITIONS, 10)
        members.start_many([kafka_python] * 2)
        kafka_python_stall.form(
            members, session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_ms=HEARTBEAT_MS, timeout=90.0
        )
        classic = list(members.drivers)
        joining = members.start(CONSUMER)
        members.wait_balanced([*classic, joining], timeout=90.0)
        assert _group_type(server, members.group) == ConsumerGroupType.CONSUMER
        expected |= append(server, members.topic, range(PARTITIONS), 10)
        members.wait_consumed(expected, timeout=60.0)
        joining.close()
        members.wait_balanced(classic, timeout=90.0)
        assert _group_type(server, members.group) == ConsumerGroupType.CLASSIC
        expected |= append(server, members.topic, range(PARTITIONS), 10)
        counts = members.wait_consumed(expected, timeout=60.0)
        assert_exactly_once(counts, expected)
    finally:
        members.stop_all()


def test_a_mixed_group_survives_a_server_kill(server: KcoordProcess) -> None:
    """SIGKILL kcoord while classic and consumer-protocol members share an upgraded group: the
    replayed group keeps every member, epoch and partition, and consumption goes on exactly once."""
    members = Group(server, topic="t-migrate-kill", group="g-migrate-kill", partitions=PARTITIONS)
    try:
        expected = create_and_fill(server, members.topic, PARTITIONS, 10)
        drivers = members.start_many([CLASSIC, CLASSIC])
        members.wait_balanced(drivers, timeout=90.0)
        drivers.append(members.start(CONSUMER))
        members.wait_balanced(drivers, timeout=90.0)
        members.wait_consumed(expected, timeout=60.0)
        wait_until(lambda: all(_covered(d) for d in drivers), 30.0, "commits of everything consumed")
        before = {d.name: d.assignment for d in drivers}
        restarted_at = time.monotonic()
        # The server is down: the fault lasts until the members consumed what came after.
        with members.fault_window(also=SERVER_UNREACHABLE):
            server.restart()
            more = append(server, members.topic, range(PARTITIONS), 10)
            counts = members.wait_consumed(expected | more, timeout=60.0)
        assert_exactly_once(counts, expected | more)
        assert {d.name: d.assignment for d in drivers} == before
        revoked = [e for d in drivers for e in d.of_kind("revoked", since=restarted_at)]
        assert not revoked, revoked  # no member had to rejoin: the classic ones were replayed as such
        assert _group_type(server, members.group) == ConsumerGroupType.CONSUMER
    finally:
        members.stop_all()


def _covered(driver: Driver) -> bool:
    """Every record the member consumed is covered by one of its commits."""
    last: dict[int, int] = {}
    for partition, offset in list(driver.consumed):
        last[partition] = max(last.get(partition, -1), offset)
    return all(driver.committed.get(p, -1) > o for p, o in last.items())


def test_groups_describe_names_the_classic_members_of_a_migrating_group(
    server: KcoordProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kcoord groups describe`` asks ConsumerGroupDescribe v1 and shows each member's protocol:
    a classic member living on inside the upgraded group is "classic", its new peer "consumer"."""
    members = Group(server, topic="t-describe-mixed", group="g-describe-mixed", partitions=PARTITIONS)
    try:
        create_and_fill(server, members.topic, PARTITIONS, 5)
        old = members.start(CLASSIC)
        members.wait_balanced([old], timeout=90.0)
        new = members.start(CONSUMER)
        members.wait_balanced([old, new], timeout=90.0)
        capsys.readouterr()
        describe = ["groups", "describe", "g-describe-mixed", "--bootstrap", server.bootstrap]
        assert main([*describe, "--json"]) == 0
        described = json.loads(capsys.readouterr().out)
        assert described["type"] == "consumer"
        assert sorted(m["protocol"] for m in described["members"]) == ["classic", "consumer"]
        assert main(describe) == 0
        table = capsys.readouterr().out.splitlines()
        header = next(i for i, line in enumerate(table) if line.startswith("MEMBER-ID"))
        assert table[header].split()[1] == "PROTOCOL"
        assert sorted(line.split()[1] for line in table[header + 1 :]) == ["classic", "consumer"]
    finally:
        members.stop_all()
