"""Memory per idle classic-group member, measured in-process with tracemalloc.

One :class:`ClassicGroupManager` (the state machine of one offsets-log partition) with a real
:class:`TimingWheel` as its timer is fed, through its pure API, what consumers send: for every
member a JoinGroup v9 without a member id (MEMBER_ID_REQUIRED), the JoinGroup with the id; then
the initial-rebalance delay passes on the wheel, and every member sends SyncGroup (the leader
with a range-style assignment of a 30-partition topic). Once every group is Stable and every
response has been dropped, the bytes tracemalloc counts beyond the empty manager, divided by the
number of members, is the figure: member objects, their protocol metadata and assignment, the
group's maps, the session deadline on the wheel and the group's rebalance history.

Every string and bytes a member holds is its own object, as when decoded from the wire (a shared
subscription object would flatter the figure). tracemalloc counts Python allocations only, and
its own bookkeeping is excluded (``Snapshot`` filtered to exclude tracemalloc).
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
from typing import Any

from kcoord.coordinator.classic import (
    ClassicGroupConfig,
    ClassicGroupManager,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
)
from kcoord.coordinator.classic.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    encode_assignment,
    encode_subscription,
)
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.errors import ErrorCode
from kcoord.timer.wheel import TimingWheel
from report import Measurement
from server import BenchServer

DESCRIPTION = "bytes per idle classic-group member, 10,000 members in 1,000 groups (in-process tracemalloc)"
TOPIC = "bench-topic"
PARTITIONS = 30
SESSION_MS = 45_000
REBALANCE_MS = 300_000
START_MS = 1_700_000_000_000
MAX_DELAYS = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("member_memory")
    group.add_argument("--member-memory-groups", type=int, default=1_000, help="groups (default 1000)")
    group.add_argument("--member-memory-members", type=int, default=10, help="members per group (default 10)")
    group.add_argument(
        "--member-memory-top", type=int, default=8, help="top allocation sites printed (default 8)"
    )


class _Sinks:
    """Collects the responses a result releases, by sink."""

    def __init__(self) -> None:
        self.answers: dict[int, Any] = {}

    def absorb(self, result: CoordinatorResult) -> None:
        for sink, response in result.responses:
            self.answers[sink] = response


def _subscription() -> bytes:
    # A fresh bytes object per member, as decoded from each member's own request.
    return bytes(bytearray(encode_subscription(ConsumerSubscription(version=1, topics=(TOPIC,)))))


def _assignments(member_ids: list[str]) -> tuple[tuple[str, bytes], ...]:
    per_member = [list(range(PARTITIONS))[i :: len(member_ids)] for i in range(len(member_ids))]
    return tuple(
        (
            member_id,
            encode_assignment(ConsumerAssignment(version=1, assigned_partitions=((TOPIC, tuple(parts)),))),
        )
        for member_id, parts in zip(member_ids, per_member, strict=True)
    )


def _join_request(group_id: str, member_id: str, index: int) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group_id,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(("range", _subscription()),),
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        reason=None,
        client_id=f"consumer-{group_id}-{index}",
        client_host="/127.0.0.1",
        api_version=9,
    )


def build_groups(manager: ClassicGroupManager, wheel: TimingWheel, groups: int, members: int) -> int:
    """Join and sync ``members`` members into each of ``groups`` groups; returns the Stable count."""
    sinks = _Sinks()
    sink_ids = iter(range(1 << 62))
    now = START_MS
    joins: dict[str, list[int]] = {}
    for g in range(groups):
        group_id = f"bench-group-{g}"
        joins[group_id] = []
        for index in range(members):
            first = next(sink_ids)
            sinks.absorb(manager.join_group(_join_request(group_id, "", index), first, now))
            required: JoinGroupResponse = sinks.answers.pop(first)
            assert required.error_code is ErrorCode.member_id_required, required
            parked = next(sink_ids)
            sinks.absorb(manager.join_group(_join_request(group_id, required.member_id, index), parked, now))
            joins[group_id].append(parked)
    # The initial delay may be extended once per delay while members keep arriving (Kafka's
    # InitialDelayedJoin), so let time pass on the wheel until every parked join is answered.
    last_parked = max(max(s) for s in joins.values())
    for _ in range(MAX_DELAYS):
        now = wheel.next_wakeup_ms() or now
        for key in wheel.advance(now):
            sinks.absorb(manager.on_timer(key, now))
        if last_parked in sinks.answers:
            break
    for group_id, parked_sinks in joins.items():
        responses: list[JoinGroupResponse] = [sinks.answers.pop(s) for s in parked_sinks]
        assert all(r.error_code is ErrorCode.none for r in responses), responses[0]
        leader = responses[0].leader
        member_ids = [r.member_id for r in responses]
        generation = responses[0].generation_id
        for member_id in member_ids:
            if member_id != leader:
                sinks.absorb(
                    manager.sync_group(SyncGroupRequest(group_id, generation, member_id), next(sink_ids), now)
                )
        sinks.absorb(
            manager.sync_group(
                SyncGroupRequest(group_id, generation, leader, assignments=_assignments(member_ids)),
                next(sink_ids),
                now,
            )
        )
    sinks.answers.clear()
    return sum(1 for g in manager.group_ids() if str(manager.group_state(g)) == "Stable")


def measure_once(groups: int, members: int, top: int) -> tuple[float, list[str]]:
    """Bytes per member for one build, and the top allocation sites (by size) as text lines."""
    gc.collect()
    tracemalloc.start(1)
    try:
        wheel = TimingWheel(start_ms=START_MS)
        manager = ClassicGroupManager(wheel, ClassicGroupConfig())
        gc.collect()
        before = tracemalloc.take_snapshot()
        stable = build_groups(manager, wheel, groups, members)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    if stable != groups:
        raise RuntimeError(f"only {stable} of {groups} groups reached Stable")
    keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
    diff = after.filter_traces(keep).compare_to(before.filter_traces(keep), "lineno")
    total = sum(stat.size_diff for stat in diff)
    sites = [
        f"    {stat.size_diff / (groups * members):7.0f} B/member  {stat.traceback[0]}" for stat in diff[:top]
    ]
    del manager, wheel
    return total / (groups * members), sites


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    del server  # in-process: the section's server is not used
    groups, members = options.member_memory_groups, options.member_memory_members
    per_member: list[float] = []
    for run_number in range(options.runs):
        bytes_per_member, sites = measure_once(groups, members, options.member_memory_top)
        per_member.append(bytes_per_member)
        print(f"  run {run_number + 1}: {bytes_per_member:,.0f} B/member", flush=True)
        if run_number == 0:
            print("  top allocation sites (growth per member):")
            print("\n".join(sites), flush=True)
    return [
        Measurement(f"idle member, {groups * members:,} in {groups:,} groups", "bytes", tuple(per_member)),
        Measurement("idle member (target < 2 KiB)", "KiB", tuple(b / 1024 for b in per_member)),
    ]
