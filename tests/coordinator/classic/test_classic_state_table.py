"""Every state-by-request cell of the classic group error table, as Kafka answers it.

Each state is built by real requests on a manual clock. ``B`` is a follower that is a member in
every live state (not parked) and ``GEN`` the group's generation; ``None`` means the request
is parked (no answer yet).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from classic_harness import Harness, form_group

from kcoord.coordinator.classic import LeavingMember
from kcoord.protocol.errors import ErrorCode

E = ErrorCode


@dataclass
class Fixture:
    h: Harness
    b: str
    generation: int


def _missing() -> Fixture:
    return Fixture(Harness(), "c-u1", 1)


def _empty() -> Fixture:
    h = Harness()
    a, b = form_group(h)
    h.leave(LeavingMember(a), LeavingMember(b))
    assert h.state() == "Empty"
    return Fixture(h, b, 2)


def _preparing() -> Fixture:
    # Three members, so that B's rejoin still waits for the third.
    h = Harness()
    a, b, _ = form_group(h, 3)
    _, parked = h.join(a)
    assert parked is None and h.state() == "PreparingRebalance"
    return Fixture(h, b, 1)


def _completing() -> Fixture:
    h = Harness()
    _, b = form_group(h, sync=False)
    assert h.state() == "CompletingRebalance"
    return Fixture(h, b, 1)


def _stable() -> Fixture:
    h = Harness()
    _, b = form_group(h)
    return Fixture(h, b, 1)


def _dead() -> Fixture:
    h = Harness()
    _, b = form_group(h)
    h.absorb(h.manager.unload(h.now))
    assert h.state() == "Dead"
    return Fixture(h, b, 1)


BUILD: dict[str, Callable[[], Fixture]] = {
    "missing": _missing,
    "Empty": _empty,
    "PreparingRebalance": _preparing,
    "CompletingRebalance": _completing,
    "Stable": _stable,
    "Dead": _dead,
}


def _code(response: Any) -> ErrorCode | None:
    return None if response is None else response.error_code


def _leave_code(response: Any) -> ErrorCode:
    if response.error_code is not ErrorCode.none:
        return response.error_code  # type: ignore[no-any-return]
    (member,) = response.members
    return member.error_code  # type: ignore[no-any-return]


REQUESTS: dict[str, Callable[[Fixture], ErrorCode | None]] = {
    "join known member": lambda f: _code(f.h.join(f.b)[1]),
    "join unknown member id": lambda f: _code(f.h.join("nobody")[1]),
    "join new member v9": lambda f: _code(f.h.join("")[1]),
    "join new member v3": lambda f: _code(f.h.join("", version=3)[1]),
    "sync": lambda f: _code(f.h.sync(f.b, f.generation)[1]),
    "sync wrong generation": lambda f: _code(f.h.sync(f.b, f.generation + 7)[1]),
    "sync unknown member": lambda f: _code(f.h.sync("nobody", f.generation)[1]),
    "heartbeat": lambda f: f.h.heartbeat(f.b, f.generation),
    "heartbeat wrong generation": lambda f: f.h.heartbeat(f.b, f.generation + 7),
    "heartbeat unknown member": lambda f: f.h.heartbeat("nobody", f.generation),
    "commit v8": lambda f: f.h.commit_error(f.b, f.generation),
    "commit v9": lambda f: f.h.commit_error(f.b, f.generation, version=9),
    "commit wrong generation": lambda f: f.h.commit_error(f.b, f.generation + 7),
    "commit unknown member": lambda f: f.h.commit_error("nobody", f.generation),
    "commit simple (generation -1)": lambda f: f.h.commit_error("", -1),
    "leave": lambda f: _leave_code(f.h.leave(LeavingMember(f.b))),
    "leave unknown member": lambda f: _leave_code(f.h.leave(LeavingMember("nobody"))),
}

STATES = ["missing", "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
UMI, IG, RIP, CNA = (
    E.unknown_member_id,
    E.illegal_generation,
    E.rebalance_in_progress,
    E.coordinator_not_available,
)
OK, MIR = E.none, E.member_id_required

# request: answers in the order of STATES (missing, Empty, Preparing, Completing, Stable, Dead)
TABLE: dict[str, tuple[ErrorCode | None, ...]] = {
    "join known member": (UMI, UMI, None, OK, OK, CNA),
    "join unknown member id": (UMI, UMI, UMI, UMI, UMI, CNA),
    "join new member v9": (MIR, MIR, MIR, MIR, MIR, CNA),
    "join new member v3": (None, None, None, None, None, CNA),
    "sync": (UMI, UMI, RIP, None, OK, CNA),
    "sync wrong generation": (UMI, UMI, IG, IG, IG, CNA),
    "sync unknown member": (UMI, UMI, UMI, UMI, UMI, CNA),
    "heartbeat": (UMI, UMI, RIP, OK, OK, CNA),
    "heartbeat wrong generation": (UMI, UMI, IG, IG, IG, CNA),
    "heartbeat unknown member": (UMI, UMI, UMI, UMI, UMI, CNA),
    "commit v8": (IG, UMI, OK, RIP, OK, CNA),
    "commit v9": (E.group_id_not_found, UMI, OK, RIP, OK, CNA),
    "commit wrong generation": (IG, UMI, IG, IG, IG, CNA),
    "commit unknown member": (IG, UMI, UMI, UMI, UMI, CNA),
    "commit simple (generation -1)": (OK, OK, UMI, UMI, UMI, CNA),
    "leave": (UMI, UMI, OK, OK, OK, CNA),
    "leave unknown member": (UMI, UMI, UMI, UMI, UMI, CNA),
}

CELLS = [
    pytest.param(request, state, expected, id=f"{state}-{request}")
    for request, row in TABLE.items()
    for state, expected in zip(STATES, row, strict=True)
]


@pytest.mark.parametrize(("request_name", "state", "expected"), CELLS)
def test_state_by_request_error(request_name: str, state: str, expected: ErrorCode | None) -> None:
    """The answer Kafka's classic coordinator gives for this request in this group state."""
    fixture = BUILD[state]()
    assert REQUESTS[request_name](fixture) == expected


def test_table_covers_every_request() -> None:
    """Every request kind in the harness has a row in the table, and the other way round."""
    assert set(TABLE) == set(REQUESTS)


def test_join_with_fenced_instance_id() -> None:
    """A static member joining with an old member id for its instance is FENCED_INSTANCE_ID."""
    h = Harness()
    form_group(h, instances=True)
    _, response = h.join("i1-stale", instance="i1")
    assert response.error_code is E.fenced_instance_id


@pytest.mark.parametrize("request_name", ["sync", "heartbeat", "commit", "leave"])
def test_fenced_instance_on_member_requests(request_name: str) -> None:
    """Sync, heartbeat, commit and leave with a stale member id for an instance are fenced."""
    h = Harness()
    form_group(h, instances=True)
    stale = "i1-stale"
    answers: dict[str, Callable[[], ErrorCode | None]] = {
        "sync": lambda: h.sync(stale, 1, instance="i1")[1].error_code,
        "heartbeat": lambda: h.heartbeat(stale, 1, instance="i1"),
        "commit": lambda: h.commit_error(stale, 1, instance="i1"),
        "leave": lambda: _leave_code(h.leave(LeavingMember(stale, "i1"))),
    }
    assert answers[request_name]() is E.fenced_instance_id


def test_commit_with_generation_minus_one_and_ids_in_empty_group_is_accepted() -> None:
    """KAFKA-14201: an Empty group accepts a -1 generation commit whatever ids it carries."""
    fixture = _empty()
    assert fixture.h.commit_error("someone", -1, instance="ghost") is E.none


def test_simple_commit_creates_empty_group_without_protocol() -> None:
    """A generation -1 commit to an unknown group creates a simple Empty group."""
    h = Harness()
    assert h.commit_error("", -1) is E.none
    assert h.state() == "Empty"
    (listed,) = h.manager.list_groups()
    assert listed.protocol_type == ""


def test_sync_with_inconsistent_protocol_name() -> None:
    """A SyncGroup (v5+) naming a different protocol is INCONSISTENT_GROUP_PROTOCOL."""
    h = Harness()
    _, b = form_group(h)
    _, response = h.sync(b, 1, protocol_type="consumer", protocol_name="roundrobin")
    assert response.error_code is E.inconsistent_group_protocol
    _, response = h.sync(b, 1, protocol_type="consumer", protocol_name="range")
    assert response.error_code is E.none


def test_leave_group_missing_answers_group_level_error() -> None:
    """LeaveGroup for a missing group is a group-level UNKNOWN_MEMBER_ID with no member results."""
    response = Harness().leave(LeavingMember("x"))
    assert response.error_code is E.unknown_member_id
    assert response.members == ()
