"""The memo of repeated request frames reads as the reader it wraps does, first time and after."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.apis.groups.heartbeat_wire import decode_heartbeat
from kcoord.apis.groups.offset_fetch_wire import decode_offset_fetch
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import decode_request
from kcoord.protocol.repeated_requests import MAX_KEPT_BYTES, RepeatedRequests
from tests.protocol.in_process import encode_request

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
client_ids = st.one_of(st.none(), names)
topics = st.one_of(
    st.none(),
    st.lists(
        st.fixed_dictionaries(
            {
                "name": st.one_of(st.none(), names),
                "topic_id": st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1)),
            }
        ),
        max_size=4,
    ),
)
flags = st.booleans()


def _frame(version: int, body: dict[str, Any], correlation_id: int, client_id: str | None) -> bytes:
    return encode_request(ApiKey.METADATA, version, body, correlation_id, client_id)[4:]  # type: ignore[arg-type]


def _body(version: int, requested: list[dict[str, Any]] | None, auto: bool, ops: bool) -> dict[str, Any]:
    if version < 12 and requested is not None:
        requested = [{**t, "name": t["name"] or ""} for t in requested]  # a null name is v12+ only
    if version < 1 and requested is None:
        requested = []
    return {
        "topics": requested,
        "allow_auto_topic_creation": auto,
        "include_cluster_authorized_operations": ops,
        "include_topic_authorized_operations": ops,
    }


@pytest.mark.parametrize("version", range(14))
@settings(max_examples=25, deadline=None)
@given(requested=topics, auto=flags, ops=flags, first_client=client_ids, second_client=client_ids)
def test_metadata_bodies_read_as_kio_reads_them(
    version: int,
    requested: list[dict[str, Any]] | None,
    auto: bool,
    ops: bool,
    first_client: str | None,
    second_client: str | None,
) -> None:
    """A Metadata frame read the first time and again (another correlation id, another client id) gives
    kio's header and request, for versions 0-13; each small frame is kept once per client id."""
    reader = RepeatedRequests(ApiKey.METADATA)
    body = _body(version, requested, auto, ops)
    kept = set()
    for correlation_id, client_id in ((11, first_client), (12, second_client), (13, first_client)):
        frame = _frame(version, body, correlation_id, client_id)
        assert reader(frame) == decode_request(frame)
        if len(frame) <= MAX_KEPT_BYTES:
            kept.add(client_id)
    assert len(reader) == len(kept)


def test_header_tagged_fields_are_read_by_kio_and_kept() -> None:
    """A flexible header carrying tagged fields reads as kio reads it, the first time and again."""
    body = _body(12, [{"name": "t", "topic_id": uuid.UUID(int=0)}], True, False)
    plain = _frame(12, body, 5, "client")
    header_end = 10 + len(b"client")
    tagged = plain[:header_end] + b"\x01\x07\x01\x00" + plain[header_end + 1 :]  # one unknown tag
    reader = RepeatedRequests(ApiKey.METADATA)
    assert reader(tagged) == decode_request(plain) == reader(tagged)
    assert len(reader) == 1


def test_other_apis_and_cut_frames_are_refused() -> None:
    """Another API's frame raises ValueError; a cut Metadata frame raises and is not memoized."""
    reader = RepeatedRequests(ApiKey.METADATA)
    heartbeat = encode_request(
        ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}, 1, "c"
    )
    with pytest.raises(ValueError):
        reader(heartbeat[4:])
    with pytest.raises(ValueError):
        reader(heartbeat[4:9])
    frame = _frame(12, _body(12, [{"name": "topic", "topic_id": uuid.UUID(int=0)}], False, False), 3, "c")
    for end in range(len(frame) - 1, 7, -1):
        with pytest.raises(Exception):  # noqa: B017 - kio raises several types for cut bodies
            reader(frame[:end])
    assert len(reader) == 0


def test_the_memo_is_bounded() -> None:
    """Past its bound the memo starts again empty rather than growing."""
    reader = RepeatedRequests(ApiKey.METADATA, max_entries=3)
    for index in range(7):
        reader(
            _frame(9, _body(9, [{"name": f"t{index}", "topic_id": uuid.UUID(int=0)}], True, False), 1, "c")
        )
        assert len(reader) <= 3


@pytest.mark.parametrize("version", range(5))
def test_heartbeats_read_through_the_memo_as_their_own_reader_reads_them(version: int) -> None:
    """Wrapped around the hand-written Heartbeat reader (itself checked against kio), the memo gives its
    header and request, with each frame's own correlation id, and refuses what the reader refuses."""
    reader = RepeatedRequests(ApiKey.HEARTBEAT, decode_heartbeat)
    body = {"group_id": "g", "generation_id": 7, "member_id": "m-1", "group_instance_id": "i"}
    for correlation_id in (1, 2, 3):
        frame = encode_request(ApiKey.HEARTBEAT, version, body, correlation_id, "client")[4:]
        assert reader(frame) == decode_heartbeat(frame)
        assert reader(frame)[0].correlation_id == correlation_id
    assert len(reader) == 1
    with pytest.raises(ValueError):
        reader(frame[:-1])
    assert len(reader) == 1


@pytest.mark.parametrize("version", [8, 9])
def test_offset_fetches_read_through_the_memo_as_their_own_reader_reads_them(version: int) -> None:
    """Wrapped around the hand-written OffsetFetch reader, the memo gives its header and request."""
    reader = RepeatedRequests(ApiKey.OFFSET_FETCH, decode_offset_fetch)
    group = {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 3,
        "topics": [{"name": "t", "partition_indexes": [0]}],
    }
    for correlation_id, client_id in ((1, "a"), (2, "a"), (3, None)):
        frame = encode_request(  # type: ignore[arg-type]
            ApiKey.OFFSET_FETCH,
            version,
            {"groups": [group], "require_stable": False},
            correlation_id,
            client_id,
        )[4:]
        assert reader(frame) == decode_offset_fetch(frame)
    assert len(reader) == 2
