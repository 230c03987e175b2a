"""Client regexes do not hold up another connection's heartbeats: a consumer-protocol member's
catastrophic regex, and a ListTransactions pattern that costs seconds over long transactional ids.

``(a+)+`` against ``"a" * n + "-"`` backtracks exponentially in Python's ``re``: measured on this
machine, a full match of one such name took 0.43 s at n=22, 1.3 s at n=24 and 5.5 s at n=26,
doubling with each further ``a``; the names below have n=240, so a single one would hold the event
loop for longer than the universe's age. RE2 decides each of them in microseconds.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient
from tests.support import abuse
from tests.support.server import KcoordProcess

CATASTROPHIC = "(a+)+"
LONG_NAMES = ["a" * 240 + f"-{index:04d}" for index in range(200)]
LATER_NAMES = ["a" * 240 + f"-{index:04d}" for index in range(200, 220)]
MATCHED = "a" * 249
"""The one topic ``CATASTROPHIC`` matches in full: the member is assigned it."""
ATTACK_S = 2.0
"""How long the member heartbeats (at most MAX_HEARTBEATS times), one heartbeat after another."""
MAX_HEARTBEATS = 2_000
BOUND_S = 0.5
"""Generous for a loaded two-core machine; with Python's re the first heartbeat timed out (30 s)."""


def _create_topics(names: list[str]) -> dict[str, Any]:
    topics = [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        for name in names
    ]
    return {"topics": topics, "timeout": 30_000, "validate_only": False}


def _heartbeat(member_id: str, epoch: int, regex: str) -> dict[str, Any]:
    return {
        "group_id": "regex-attacker",
        "member_id": member_id,
        "member_epoch": epoch,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": regex,
        "topic_partitions": [] if epoch == 0 else None,
    }


async def _create(client: AsyncRawClient, names: list[str]) -> dict[str, uuid.UUID]:
    created = await client.call(ApiKey.CREATE_TOPICS, 7, _create_topics(names), within_s=60)
    assert [t.error_code for t in created.topics] == [ErrorCode.none] * len(names)
    return {t.name: t.topic_id for t in created.topics}


async def _attack(port: int, matched_id: uuid.UUID) -> tuple[list[float], list[set[uuid.UUID]]]:
    """Join with the catastrophic regex, heartbeat with it (topics created midway), and try an
    RE2-only rejection; the latency of every heartbeat and the topics of every assignment."""
    latencies: list[float] = []
    assigned: list[set[uuid.UUID]] = []
    client = await AsyncRawClient.connect(port, "regex-attacker")
    try:
        member_id, epoch = str(uuid.uuid4()), 0
        deadline = time.monotonic() + ATTACK_S
        while len(latencies) < MAX_HEARTBEATS and time.monotonic() < deadline:
            if len(latencies) == 10:
                await _create(client, LATER_NAMES)
            started = time.perf_counter()
            answer = await client.call(
                ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, _heartbeat(member_id, epoch, CATASTROPHIC), within_s=30
            )
            latencies.append(time.perf_counter() - started)
            assert answer.error_code == ErrorCode.none, answer.error_message
            epoch = answer.member_epoch
            if answer.assignment is not None:
                assigned.append({tp.topic_id for tp in answer.assignment.topic_partitions})
        refused = await client.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, _heartbeat(str(uuid.uuid4()), 0, "(a)\\1"), within_s=30
        )
        assert refused.error_code == ErrorCode.invalid_regular_expression
    finally:
        await client.close()
    return latencies, assigned


def test_a_catastrophic_regex_subscription_does_not_stall_a_bystander(tmp_path: Path) -> None:
    """While a KIP-848 member heartbeats with ``(a+)+`` over 220 topics of 245 characters (and its
    regex is resolved again as topics appear), it is assigned nothing until the regex's match (too
    long for the coordinator's turn) comes back, then only the topic matched in full; its
    heartbeats and a bystander's heartbeats all answer within 0.5 s, and a backreference is
    INVALID_REGULAR_EXPRESSION without RE2 printing to the server's stderr."""
    server = KcoordProcess(tmp_path / "data").start()
    try:

        async def scenario() -> tuple[list[float], list[set[uuid.UUID]], uuid.UUID, abuse.Bystander]:
            admin = await AsyncRawClient.connect(server.port, "regex-admin")
            try:
                ids = await _create(admin, [*LONG_NAMES, MATCHED])
            finally:
                await admin.close()
            async with abuse.bystander(server.port) as probe:
                attacker, assigned = await _attack(server.port, ids[MATCHED])
            return attacker, assigned, ids[MATCHED], probe

        attacker, assigned, matched_id, probe = asyncio.run(asyncio.wait_for(scenario(), 180))
        assert assigned and assigned[-1] == {matched_id}, assigned
        assert all(topics in (set(), {matched_id}) for topics in assigned), assigned
        bystander = probe.latencies_s
        assert probe.failures == 0
        assert len(attacker) > 10
        assert len(bystander) > 50
        assert max(attacker) < BOUND_S, f"attacker heartbeat max {max(attacker) * 1000:.0f} ms"
        assert max(bystander) < BOUND_S, (
            f"bystander heartbeat max {max(bystander) * 1000:.0f} ms, "
            f"p99 {abuse.percentile(bystander, 0.99) * 1000:.0f} ms"
        )
        assert not [line for line in server.raw_log if "re2.cc" in line]
    finally:
        server.kill()


LONG_IDS = ["a" * 32_000 + f"-{index}" for index in range(6)]
COSTLY = "(.*a.*){1000}"
"""Linear in RE2 but its DFA gives up: about 1-1.5 s per 32 KiB id on this machine."""


async def _init_transactional(client: AsyncRawClient, transactional_id: str) -> None:
    """InitProducerId v4, again while the answer is COORDINATOR_LOAD_IN_PROGRESS (as clients do while
    ``__transaction_state`` is first created and loaded; bounded to 10 s)."""
    body = {
        "transactional_id": transactional_id,
        "transaction_timeout": 60_000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    deadline = time.monotonic() + 10
    while True:
        answer = await client.call(ApiKey.INIT_PRODUCER_ID, 4, body, within_s=30)
        if answer.error_code != ErrorCode.coordinator_load_in_progress or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    assert answer.error_code == ErrorCode.none


def test_a_costly_transactional_id_pattern_does_not_stall_a_bystander(tmp_path: Path) -> None:
    """ListTransactions v2 with a pattern costing about a second per 32 KiB id, over six such ids,
    lists exactly the ids it matches in full while a bystander's heartbeats all answer within 0.5 s
    (matched on the event loop, one heartbeat waited out the whole listing: 7.1 s here)."""
    server = KcoordProcess(tmp_path / "data").start()
    try:

        async def scenario() -> tuple[list[str], float, abuse.Bystander]:
            client = await AsyncRawClient.connect(server.port, "txn-lister")
            try:
                for transactional_id in [*LONG_IDS, "short"]:
                    await _init_transactional(client, transactional_id)
                async with abuse.bystander(server.port) as probe:
                    started = time.perf_counter()
                    listed = await client.call(
                        ApiKey.LIST_TRANSACTIONS,
                        2,
                        {
                            "state_filters": [],
                            "producer_id_filters": [],
                            "duration_filter": -1,
                            "transactional_id_pattern": COSTLY,
                        },
                        within_s=120,
                    )
                    elapsed_s = time.perf_counter() - started
                assert listed.error_code == ErrorCode.none
                ids = sorted(state.transactional_id for state in listed.transaction_states)
            finally:
                await client.close()
            return ids, elapsed_s, probe

        ids, elapsed_s, probe = asyncio.run(asyncio.wait_for(scenario(), 180))
        assert ids == sorted(LONG_IDS)
        bystander = probe.latencies_s
        assert probe.failures == 0
        assert len(bystander) > 10, f"listing took {elapsed_s:.1f} s"
        assert max(bystander) < BOUND_S, (
            f"bystander heartbeat max {max(bystander) * 1000:.0f} ms over a {elapsed_s:.1f} s listing"
        )
    finally:
        server.kill()


MANY_LONG_NAMES = ["a" * 236 + f"-{index:04d}" for index in range(1200)]
COSTLY_OR_X = COSTLY + "|x"
"""Matches the topic ``x`` only; over ``MANY_LONG_NAMES`` RE2's DFA gives up and it costs about 1 s."""


def test_a_costly_regex_over_many_long_topics_is_matched_off_the_event_loop(tmp_path: Path) -> None:
    """A KIP-848 member joining with a regex costing about a second over the topic catalogue is
    answered within 0.5 s, and so is every bystander heartbeat, until the match (run off the event
    loop and fed back to the group) assigns it the one topic the regex matches
    (with the match on the event loop the joiner's first heartbeat took 1.1-1.3 s here)."""
    server = KcoordProcess(tmp_path / "data").start()
    try:

        async def scenario() -> tuple[list[float], bool, abuse.Bystander]:
            client = await AsyncRawClient.connect(server.port, "regex-joiner")
            latencies: list[float] = []
            assigned = False
            try:
                x_id = (await _create(client, ["x", *MANY_LONG_NAMES[:600]]))["x"]
                await _create(client, MANY_LONG_NAMES[600:])  # at most 1000 partitions a request
                async with abuse.bystander(server.port) as probe:
                    member_id, epoch = str(uuid.uuid4()), 0
                    deadline = time.monotonic() + 60
                    while not assigned and time.monotonic() < deadline:
                        started = time.perf_counter()
                        answer = await client.call(
                            ApiKey.CONSUMER_GROUP_HEARTBEAT,
                            1,
                            _heartbeat(member_id, epoch, COSTLY_OR_X),
                            within_s=30,
                        )
                        latencies.append(time.perf_counter() - started)
                        assert answer.error_code == ErrorCode.none, answer.error_message
                        epoch = answer.member_epoch
                        if answer.assignment is not None:
                            topics = {tp.topic_id for tp in answer.assignment.topic_partitions}
                            assert topics in (set(), {x_id}), topics
                            assigned = topics == {x_id}
                        await asyncio.sleep(0.05)
            finally:
                await client.close()
            return latencies, assigned, probe

        joiner, assigned, probe = asyncio.run(asyncio.wait_for(scenario(), 180))
        assert assigned, f"never assigned x over {len(joiner)} heartbeats"
        bystander = probe.latencies_s
        assert probe.failures == 0 and len(bystander) > 5
        assert max(joiner) < BOUND_S, f"joiner heartbeat max {max(joiner) * 1000:.0f} ms"
        assert max(bystander) < BOUND_S, (
            f"bystander heartbeat max {max(bystander) * 1000:.0f} ms, "
            f"p99 {abuse.percentile(bystander, 0.99) * 1000:.0f} ms"
        )
    finally:
        server.kill()
