"""A member that lists a protocol twice (found by the fuzz suite) still lets its group choose a protocol.

Each listing used to count as a supporter, so one member with ``range`` twice made ``range`` look
supported by two members: no protocol matched the member count and the join deadline's protocol
vote raised in a timer, leaving the group stuck.
"""

from __future__ import annotations

from tests.coordinator.classic.classic_harness import REBALANCE_MS, Harness, subscription

from kcoord.protocol.errors import ErrorCode

TWICE = (("range", subscription("orders")), ("range", subscription("orders")))


def test_one_member_listing_a_protocol_twice_completes_its_join() -> None:
    """The join deadline passes and the lone member gets a JoinGroup answer choosing ``range``."""
    h = Harness()
    _, first = h.join(protocols=TWICE)
    assert first.error_code is ErrorCode.member_id_required
    sink, parked = h.join(first.member_id, protocols=TWICE)
    if parked is None:
        h.advance(REBALANCE_MS)
        parked = h.answers[sink]
    assert parked.error_code is ErrorCode.none
    assert parked.protocol_name == "range"


def test_second_member_without_the_duplicated_protocol_is_refused() -> None:
    """A newcomer with only ``roundrobin`` cannot join a group whose one member lists ``range`` twice."""
    h = Harness()
    _, first = h.join(protocols=TWICE)
    h.join(first.member_id, protocols=TWICE)
    _, other = h.join(protocols=(("roundrobin", subscription("orders")),))
    assert other.error_code is ErrorCode.inconsistent_group_protocol
