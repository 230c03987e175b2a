"""Fast failover and partition growth: kcoord's additions to the classic state machine."""

from __future__ import annotations

from classic_harness import SESSION_MS, Harness, form_group, subscription

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.timer_keys import session_key
from kcoord.protocol.errors import ErrorCode

HEARTBEAT_MS = 3_000


def _beat(h: Harness, connections: dict[str, int], generation: int, beats: int = 3) -> None:
    """Every member heartbeats on its connection every interval, ``beats`` times."""
    for _ in range(beats):
        for member_id, connection_id in connections.items():
            h.manager.note_member_connection("g", member_id, connection_id, h.now, heartbeat=True)
            assert h.heartbeat(member_id, generation) is ErrorCode.none
        h.advance(HEARTBEAT_MS)


def _generation(h: Harness) -> int:
    return h.manager._groups["g"].generation_id


def test_closed_connection_shortens_the_session_to_two_heartbeat_intervals() -> None:
    """A dynamic member whose connection closed is removed after about two observed intervals."""
    h = Harness()
    alive, dying = form_group(h, 2)
    generation = _generation(h)
    _beat(h, {alive: 8, dying: 7}, generation)
    h.absorb(h.manager.member_disconnected("g", dying, 7, h.now))
    assert h.timer.deadline(session_key("g", dying)) == h.now + 2 * HEARTBEAT_MS
    h.advance(2 * HEARTBEAT_MS)
    assert h.state() == "PreparingRebalance"
    record = h.manager.rebalance_history("g")[-1]
    assert record.trigger == "member_disconnected"
    assert dying not in h.manager._groups["g"].members


def test_a_member_that_comes_back_keeps_its_place() -> None:
    """A heartbeat on a new connection within the grace restores the full session: no rebalance."""
    h = Harness()
    other, member = form_group(h, 2)
    generation = _generation(h)
    _beat(h, {other: 8, member: 7}, generation)
    h.absorb(h.manager.member_disconnected("g", member, 7, h.now))
    h.advance(HEARTBEAT_MS)
    h.manager.note_member_connection("g", member, 9, h.now, heartbeat=True)
    assert h.heartbeat(member, generation) is ErrorCode.none
    assert h.timer.deadline(session_key("g", member)) == h.now + SESSION_MS
    _beat(h, {other: 8, member: 9}, generation)
    assert h.state() == "Stable"


def test_an_old_connection_closing_does_not_touch_a_member_that_moved() -> None:
    """Only the connection that last carried the member counts."""
    h = Harness()
    other, member = form_group(h, 2)
    generation = _generation(h)
    _beat(h, {other: 8, member: 7}, generation)
    h.manager.note_member_connection("g", member, 9, h.now, heartbeat=True)
    before = h.timer.deadline(session_key("g", member))
    h.absorb(h.manager.member_disconnected("g", member, 7, h.now))
    assert h.timer.deadline(session_key("g", member)) == before


def test_static_members_keep_their_full_session() -> None:
    """Static members survive restarts by design, so a closed connection changes nothing."""
    h = Harness()
    members = form_group(h, 2, instances=True)
    generation = _generation(h)
    h.manager.note_member_connection("g", members[0], 7, h.now, heartbeat=True)
    before = h.timer.deadline(session_key("g", members[0]))
    h.absorb(h.manager.member_disconnected("g", members[0], 7, h.now))
    assert h.timer.deadline(session_key("g", members[0])) == before
    assert generation == _generation(h)


def test_fast_failover_can_be_turned_off() -> None:
    """With the setting off, a closed connection leaves the session timeout alone (Kafka's way)."""
    h = Harness(ClassicGroupConfig(fast_failover=False))
    _, member = form_group(h, 2)
    h.manager.note_member_connection("g", member, 7, h.now, heartbeat=True)
    before = h.timer.deadline(session_key("g", member))
    h.absorb(h.manager.member_disconnected("g", member, 7, h.now))
    assert h.timer.deadline(session_key("g", member)) == before


def test_grace_has_a_floor_without_observed_heartbeats() -> None:
    """A member never seen heartbeating gets the default interval's grace, not zero."""
    h = Harness()
    _, member = form_group(h, 2)
    h.manager.note_member_connection("g", member, 7, h.now, heartbeat=False)
    h.absorb(h.manager.member_disconnected("g", member, 7, h.now))
    assert h.timer.deadline(session_key("g", member)) == h.now + 2 * HEARTBEAT_MS


def test_partition_growth_rebalances_subscribed_groups_only() -> None:
    """Partitions added to a topic a Stable group subscribes to start a rebalance named for it."""
    h = Harness()
    form_group(h, 2, group="g")
    form_group(h, 1, group="other")
    h.absorb(h.manager.on_partitions_added("unrelated-topic", h.now))
    assert h.state("g") == "Stable"
    subscribed = next(iter(h.manager._groups["g"].compute_subscribed_topics() or []))
    h.absorb(h.manager.on_partitions_added(subscribed, h.now))
    assert h.state("g") == "PreparingRebalance"
    assert h.manager.rebalance_history("g")[-1].trigger == "partitions_added"
    assert subscription(subscribed)
