"""Group timer keys: what each group kind writes reads back to the same target, and nothing else does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kcoord.coordinator.classic import timer_keys as classic_keys
from kcoord.coordinator.consumer import timer_keys as consumer_keys

_ids = st.text(max_size=12)


@given(group=_ids, member=_ids)
def test_every_written_key_parses_back_to_its_target(group: str, member: str) -> None:
    """Ids holding ``:`` or digits still parse back exactly (the group id carries its length)."""
    assert classic_keys.parse_key(classic_keys.join_key(group)) == classic_keys.TimerTarget("join", group)
    assert classic_keys.parse_key(classic_keys.sync_key(group)) == classic_keys.TimerTarget("sync", group)
    session = classic_keys.session_key(group, member)
    assert classic_keys.parse_key(session) == classic_keys.TimerTarget("session", group, member)
    for make, kind in (
        (consumer_keys.session_key, "session"),
        (consumer_keys.rebalance_key, "rebalance"),
        (consumer_keys.join_key, "join"),
        (consumer_keys.sync_key, "sync"),
    ):
        assert consumer_keys.parse_key(make(group, member)) == consumer_keys.TimerTarget(kind, group, member)
    assert consumer_keys.parse_key(session) is None
    assert classic_keys.parse_key(consumer_keys.session_key(group, member)) is None


def test_malformed_keys_are_not_owned() -> None:
    """A wrong kind, length, missing or extra member, or a foreign prefix parses to None."""
    for key in (
        "classic:join:1:g:m",
        "classic:session:1:g",
        "classic:session:1:gx",
        "classic:join:2:g",
        "classic:join:x:g",
        "classic:other:1:g",
        "consumer:session:1:g",
        "consumer:session:1:gm",
        "share:session:1:g:m",
    ):
        assert classic_keys.parse_key(key) is None, key
        assert consumer_keys.parse_key(key) is None, key
