"""Proving kafka-python 3.0.12's post-SyncGroup stall from the server's side before working around it.

The stall (see tests/support/kafka_python.py): a member receives a SyncGroup answer that assigns it
partitions, then sends nothing more until the coordinator expires it. A test helper may replace
such a member only when the server's own log shows exactly that:

1. the member's last SyncGroup was answered with no error and a non-empty assignment
   (``group.sync_answered``, a debug line, so the server must run at ``kcoord.log.level=debug``);
2. the coordinator then expired that same member for its session timeout (``member.expired``) no
   later than ``session.timeout.ms + heartbeat.interval.ms`` after the answer: nothing the member
   sent after its first heartbeat interval reached the coordinator. With a long session (the
   clients' default 45 s) the expiry comes after the balanced wait has given up, so the helper
   waits for it, but never past that bound.

In a group that mixes client libraries only its kafka-python members may be replaced this way.

The mechanism, read in kafka-python 3.0.12's own source: the leader's first assignment is made
before ``ConsumerCoordinator._handle_metadata_update`` (kafka/coordinator/consumer.py) has rebuilt
``_metadata_snapshot`` after ``subscribe`` (it stays empty until the next metadata refresh, even when
the client already knew the topic), so ``need_rejoin`` turns true once that refresh lands and the
leader rejoins about 100 ms after its first assignment, with ``rejoin_needed`` itself still false.
In that second round ``_perform_assignment`` sets ``_assignment_snapshot`` inside the JoinGroup/SyncGroup
task, which makes ``need_rejoin`` false while the SyncGroup is still in flight. If ``poll``'s timer
expires in that window, ``join_group_async`` (kafka/coordinator/base.py) returns with the task still
running, and since ``ConsumerCoordinator.poll`` only calls ``ensure_active_group`` while
``need_rejoin`` is true, nothing ever awaits the task again: the answered assignment is never
applied, the heartbeat stays disabled from the join, and the member polls on owning nothing.

A member that owns nothing for any other reason (a SyncGroup never answered, an empty assignment,
a member lost from a generation) is a server bug, and the caller fails with the group's state.
Every replacement is counted in :data:`RETRIES` and shown in the session's terminal summary.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kcoord.coordinator.classic.consumer_protocol import decode_assignment
from tests.support.failover_clients import CLIENT_SESSION_TIMEOUT_MS, DefaultTimingGroup, group_view
from tests.support.group_clients import Driver, Group
from tests.support.server import KcoordProcess

#: One line per member replaced after a proven stall, for the session summary.
RETRIES: list[str] = []
#: The server settings the proof needs: ``group.sync_answered`` is a debug line.
DEBUG_LOG = {"kcoord.log.level": "debug"}
#: How late a server log line may be read after the moment it records (a loaded machine).
LOG_SLACK_S = 2.0
#: How many groups were formed through a helper that may retry (the denominator of RETRIES).
FORMED: list[str] = []


@dataclass(frozen=True)
class Stall:
    """The server-side evidence of one stalled member."""

    client_id: str
    member_id: str
    generation: int
    partitions: int
    silent_s: float

    def describe(self) -> str:
        return (
            f"{self.client_id} (member {self.member_id}, generation {self.generation}): SyncGroup answered "
            f"with {self.partitions} partitions, then silent until expired {self.silent_s:.1f}s later"
        )


@contextmanager
def debug_server(data_dir: Path) -> Iterator[KcoordProcess]:
    """A fresh kcoord at debug level (what a group formed through :func:`form` needs), killed after."""
    server = KcoordProcess(data_dir, DEBUG_LOG).start()
    try:
        yield server
    finally:
        server.kill()


def _at(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(event["timestamp"]))


def _partition_count(assignment_hex: str) -> int:
    data = bytes.fromhex(assignment_hex)
    if not data:
        return 0
    return sum(len(partitions) for _, partitions in decode_assignment(data).assigned_partitions)


def _last_answer(server: KcoordProcess, group: str, client_id: str) -> dict[str, Any] | None:
    """The member's last ``group.sync_answered`` line, if it was answered with no error and partitions."""
    answers = [
        e
        for e in server.events("group.sync_answered")
        if e.get("group") == group and e.get("client_id") == client_id
    ]
    if not answers:
        return None
    answer = answers[-1]
    if int(answer["error"]) != 0 or _partition_count(str(answer["assignment"])) == 0:
        return None
    return answer


def proven_stall(
    server: KcoordProcess, group: str, client_id: str, *, session_timeout_ms: int, heartbeat_ms: int
) -> Stall | None:
    """The server-side proof that ``client_id`` stalled after a good SyncGroup answer, else None."""
    answer = _last_answer(server, group, client_id)
    if answer is None:
        return None
    expiries = [
        e
        for e in server.events("member.expired")
        if e.get("group") == group and e.get("member") == answer["member"] and _at(e) >= _at(answer)
    ]
    if not expiries:
        return None
    silent_s = (_at(expiries[0]) - _at(answer)).total_seconds()
    if silent_s > (session_timeout_ms + heartbeat_ms) / 1000:
        return None
    partitions = _partition_count(str(answer["assignment"]))
    return Stall(client_id, str(answer["member"]), int(answer["generation"]), partitions, silent_s)


def awaited_stall(
    server: KcoordProcess, group: str, client_id: str, *, session_timeout_ms: int, heartbeat_ms: int
) -> Stall | None:
    """:func:`proven_stall`, given the time the proof needs: a member answered with partitions is
    expired at most ``session.timeout.ms + heartbeat.interval.ms`` after the answer, which may be
    later than the balanced wait (a 45 s session), so the expiry is waited for until that bound."""
    bound_s = (session_timeout_ms + heartbeat_ms) / 1000 + LOG_SLACK_S
    while True:
        proof = proven_stall(
            server, group, client_id, session_timeout_ms=session_timeout_ms, heartbeat_ms=heartbeat_ms
        )
        answer = _last_answer(server, group, client_id)
        if proof is not None or answer is None:
            return proof
        if (datetime.now(UTC) - _at(answer)).total_seconds() > bound_s:
            return None
        time.sleep(0.2)


def form(
    group: Group,
    *,
    session_timeout_ms: int,
    heartbeat_ms: int,
    restart: Callable[[Driver], Driver] | None = None,
    coordinator: KcoordProcess | None = None,
    timeout: float = 40.0,
) -> None:
    """Wait (``timeout`` s) until the group's members own every partition exactly once; a kafka-python
    member hit by the stall while the group forms (set-up, not the behaviour under test) is replaced
    once, in place, by ``restart(stalled)`` (default: a new member of the same kind and session), and
    only when :func:`proven_stall` proves it from the log of ``coordinator`` (default: the group's
    server), which must run at debug level. Anything else fails with the group's state and history
    as the coordinator's ``/v1/groups`` shows them."""
    FORMED.append(group.group)
    server = coordinator or group.server
    try:
        group.wait_balanced(timeout=timeout)
        return
    except AssertionError as failure:
        if not any(d.kind.client == "kafka-python" for d in group.drivers):
            raise AssertionError(f"{failure}\n/v1/groups: {server_view(server, group)}") from None
    idle = [driver for driver in group.drivers if driver.alive and not driver.assignment]
    proofs = {
        driver.name: awaited_stall(
            server,
            group.group,
            driver.name,
            session_timeout_ms=session_timeout_ms,
            heartbeat_ms=heartbeat_ms,
        )
        if driver.kind.client == "kafka-python"
        else None
        for driver in idle
    }
    unproven = [name for name, proof in proofs.items() if proof is None]
    if not idle or unproven:
        raise AssertionError(
            f"group {group.group} did not form; members owning nothing without the kafka-python stall's "
            f"server-side signature: {unproven or 'none idle'}\n/v1/groups: {server_view(server, group)}\n"
            + group.diagnose()
        )
    for driver in idle:
        proof = proofs[driver.name]
        assert proof is not None
        RETRIES.append(f"{group.group}: {proof.describe()}")
        driver.kill()
        index = group.drivers.index(driver)
        group.drivers.remove(driver)
        group.retired.append(driver)
        if restart is None:
            replacement = group.start(driver.kind, session_timeout_ms=session_timeout_ms)
        else:
            replacement = restart(driver)
        group.drivers.remove(replacement)
        group.drivers.insert(index, replacement)
    group.wait_balanced(timeout=timeout)


def form_default_timing(
    group: DefaultTimingGroup,
    *,
    session_timeout_ms: int = CLIENT_SESSION_TIMEOUT_MS,
    restart: Callable[[Driver], Driver] | None = None,
    coordinator: KcoordProcess | None = None,
    timeout: float = 40.0,
) -> None:
    """:func:`form` for members with the clients' default timings (their session unless given)."""
    form(
        group,
        session_timeout_ms=session_timeout_ms,
        heartbeat_ms=group.heartbeat_ms,
        restart=restart,
        coordinator=coordinator,
        timeout=timeout,
    )


def server_view(server: KcoordProcess, group: Group) -> str:
    """The group's state, members and rebalance history as ``server``'s ``/v1/groups`` shows them."""
    return json.dumps(group_view(server, group.group), indent=1)
