"""Acceptance (issue 4) item 6a and its negative control: a crashed consumer's partitions move in seconds.

With the clients' default 45 s session, Kafka would leave a SIGKILLed member's partitions idle
for up to 45 s. kcoord sees the member's connection close without a LeaveGroup and pulls its
session deadline in to about two heartbeat intervals (trigger ``member_disconnected``). With
``kcoord.fast.failover.enable=false`` the member lasts its whole session, which shows that the
feature, not something else, is what makes the failover fast.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.failover.conftest import MakeGroup
from tests.support.failover_clients import (
    CLIENT_HEARTBEAT_MS,
    CLIENT_SESSION_TIMEOUT_MS,
    DefaultTimingGroup,
)
from tests.support.group_clients import ClientKind, create_and_fill
from tests.support.kafka_python_stall import DEBUG_LOG, form_default_timing
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

KINDS = [ClientKind("kafka-python", "kafka-python"), ClientKind("confluent", "confluent")]
PARTITIONS, MEMBERS = 6, 3
FAILOVER_LIMIT_S = 10.0
SLOW_SESSION_TIMEOUT_MS = 15_000


def kill_one_and_time_failover(
    group: DefaultTimingGroup, kind: ClientKind, session_timeout_ms: int = CLIENT_SESSION_TIMEOUT_MS
) -> float:
    """Run three members, SIGKILL one, and return how long until the others own its partitions."""
    create_and_fill(group.server, group.topic, PARTITIONS, 5)
    for _ in range(MEMBERS):
        group.start(kind, session_timeout_ms=session_timeout_ms)
    form_default_timing(group, session_timeout_ms=session_timeout_ms)
    victim, *survivors = group.drivers
    orphaned = set(victim.assignment or ())
    assert orphaned
    killed_at = time.monotonic()
    victim.kill()
    group.wait_balanced(survivors, timeout=SLOW_SESSION_TIMEOUT_MS / 1000 + 15)
    return group.all_owned_at(orphaned, since=killed_at) - killed_at


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.slow
def test_killed_default_consumer_partitions_move_within_ten_seconds(
    kcoord: KcoordProcess, make_group: MakeGroup, kind: ClientKind
) -> None:
    """A SIGKILLed member with a 45 s session loses its partitions to the survivors in under 10 s."""
    group = make_group(kcoord, PARTITIONS)
    failover_s = kill_one_and_time_failover(group, kind)
    print(f"{kind.name}: failover {failover_s:.2f}s, margin {FAILOVER_LIMIT_S - failover_s:.2f}s")
    assert failover_s < FAILOVER_LIMIT_S, f"took {failover_s:.2f}s\n{group.diagnose()}"
    triggers = [e["trigger"] for e in group.rebalances()]
    assert triggers[-1] == "member_disconnected", triggers


@pytest.mark.slow
def test_without_fast_failover_killed_consumer_waits_out_its_session(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, make_group: MakeGroup
) -> None:
    """With fast failover off, a killed member's partitions stay idle past 10 s, then move at session end."""
    server = kcoord_factory(tmp_path / "slow", {"kcoord.fast.failover.enable": "false", **DEBUG_LOG}).start()
    group = make_group(server, PARTITIONS)
    kind = ClientKind("kafka-python", "kafka-python")
    failover_s = kill_one_and_time_failover(group, kind, session_timeout_ms=SLOW_SESSION_TIMEOUT_MS)
    print(f"fast failover off: failover {failover_s:.2f}s")
    upper_s = (SLOW_SESSION_TIMEOUT_MS + CLIENT_HEARTBEAT_MS) / 1000 + 1.0
    assert FAILOVER_LIMIT_S < failover_s < upper_s, f"took {failover_s:.2f}s\n{group.diagnose()}"
    triggers = [e["trigger"] for e in group.rebalances()]
    assert triggers[-1] == "member_expired", triggers
