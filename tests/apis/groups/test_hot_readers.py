"""The hand-written Heartbeat and OffsetFetch readers agree with kio's reader for every version they read."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.apis.groups.heartbeat_wire import decode_heartbeat
from kcoord.apis.groups.offset_fetch_wire import decode_offset_fetch
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import decode_request
from tests.protocol.in_process import encode_request

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
int32 = st.integers(-(2**31), 2**31 - 1)
client_ids = st.one_of(st.none(), names)

heartbeats = st.fixed_dictionaries(
    {
        "group_id": names,
        "generation_id": int32,
        "member_id": names,
        "group_instance_id": st.one_of(st.none(), names),
    }
)
fetch_topics = st.one_of(
    st.none(),
    st.lists(
        st.fixed_dictionaries({"name": names, "partition_indexes": st.lists(int32, max_size=6)}),
        max_size=4,
    ),
)
fetch_groups = st.lists(
    st.fixed_dictionaries(
        {
            "group_id": names,
            "member_id": st.one_of(st.none(), names),
            "member_epoch": int32,
            "topics": fetch_topics,
        }
    ),
    max_size=4,
)


def _frame(api_key: int, version: int, body: dict[str, Any], client_id: str | None) -> bytes:
    return encode_request(api_key, version, body, 77, client_id)[4:]  # type: ignore[arg-type]


def _heartbeat_fields(request: Any) -> tuple[Any, ...]:
    return (
        request.group_id,
        int(request.generation_id),
        request.member_id,
        getattr(request, "group_instance_id", None),
    )


def _fetch_fields(request: Any) -> tuple[Any, ...]:
    groups = tuple(
        (
            g.group_id,
            getattr(g, "member_id", None),
            int(getattr(g, "member_epoch", -1)),
            None
            if g.topics is None
            else tuple((t.name, tuple(int(i) for i in t.partition_indexes)) for t in g.topics),
        )
        for g in request.groups
    )
    return groups, bool(request.require_stable)


@pytest.mark.parametrize("version", range(5))
@settings(max_examples=40, deadline=None)
@given(body=heartbeats, client_id=client_ids)
def test_heartbeat_reader_matches_kio(version: int, body: dict[str, Any], client_id: str | None) -> None:
    """Header and every field a Heartbeat carries read as kio reads them, for versions 0-4."""
    frame = _frame(ApiKey.HEARTBEAT, version, body, client_id)
    header, request = decode_heartbeat(frame)
    kio_header, kio_request = decode_request(frame)
    assert header == kio_header
    assert _heartbeat_fields(request) == _heartbeat_fields(kio_request)


@pytest.mark.parametrize("version", [8, 9])
@settings(max_examples=40, deadline=None)
@given(groups=fetch_groups, stable=st.booleans(), client_id=client_ids)
def test_offset_fetch_reader_matches_kio(
    version: int, groups: list[dict[str, Any]], stable: bool, client_id: str | None
) -> None:
    """Header, groups, members, topics, partitions and require_stable read as kio reads them (v8-9)."""
    frame = _frame(ApiKey.OFFSET_FETCH, version, {"groups": groups, "require_stable": stable}, client_id)
    header, request = decode_offset_fetch(frame)
    kio_header, kio_request = decode_request(frame)
    assert header == kio_header
    assert _fetch_fields(request) == _fetch_fields(kio_request)


@pytest.mark.parametrize("version", range(5))
def test_cut_heartbeats_are_refused(version: int) -> None:
    """Every truncation of a Heartbeat frame raises ValueError (the router then leaves it to kio)."""
    body = {"group_id": "group", "generation_id": 3, "member_id": "member-1", "group_instance_id": "i"}
    frame = _frame(ApiKey.HEARTBEAT, version, body, "client")
    for end in range(len(frame) - 1, 0, -1):
        with pytest.raises(ValueError):
            decode_heartbeat(frame[:end])


@pytest.mark.parametrize("version", [8, 9])
def test_cut_offset_fetches_are_refused(version: int) -> None:
    """Every truncation of an OffsetFetch frame raises ValueError (the router then leaves it to kio)."""
    group = {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 4,
        "topics": [{"name": "t", "partition_indexes": [0, 1]}],
    }
    frame = _frame(ApiKey.OFFSET_FETCH, version, {"groups": [group], "require_stable": True}, "client")
    for end in range(len(frame) - 1, 0, -1):
        with pytest.raises(ValueError):
            decode_offset_fetch(frame[:end])


def test_other_apis_and_versions_are_refused() -> None:
    """A frame of another API, or an OffsetFetch version below 8, is not read by these readers."""
    beat = _frame(ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}, "c")
    with pytest.raises(ValueError):
        decode_offset_fetch(beat)
    old_fetch = _frame(
        ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "topics": None, "require_stable": False}, "c"
    )
    with pytest.raises(ValueError):
        decode_offset_fetch(old_fetch)
    with pytest.raises(ValueError):
        decode_heartbeat(old_fetch)
