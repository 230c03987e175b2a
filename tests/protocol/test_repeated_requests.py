"""The memo of repeated request bodies reads every Metadata version as kio does, first time and after."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import decode_request
from kcoord.protocol.repeated_requests import RepeatedRequests
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
    """A Metadata body read the first time and again (another correlation id and client id) gives kio's
    header and request, for versions 0-13; the second read is served from the memo."""
    reader = RepeatedRequests(ApiKey.METADATA)
    body = _body(version, requested, auto, ops)
    for correlation_id, client_id in ((11, first_client), (12, second_client)):
        frame = _frame(version, body, correlation_id, client_id)
        assert reader(frame) == decode_request(frame)
    assert len(reader) == 1


def test_header_tagged_fields_are_left_to_kio_and_not_kept() -> None:
    """A flexible header carrying tagged fields is read by kio (which skips them) and not memoized."""
    body = _body(12, [{"name": "t", "topic_id": uuid.UUID(int=0)}], True, False)
    plain = _frame(12, body, 5, "client")
    header_end = 10 + len(b"client")
    tagged = plain[:header_end] + b"\x01\x07\x01\x00" + plain[header_end + 1 :]  # one unknown tag
    reader = RepeatedRequests(ApiKey.METADATA)
    header, request = reader(tagged)
    assert (header, request) == decode_request(plain)
    assert len(reader) == 0


def test_other_apis_and_cut_frames_are_refused() -> None:
    """Another API's frame raises ValueError; a cut Metadata frame raises and is not memoized."""
    reader = RepeatedRequests(ApiKey.METADATA)
    heartbeat = encode_request(
        ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}, 1, "c"
    )
    with pytest.raises(ValueError):
        reader(heartbeat[4:])
    frame = _frame(12, _body(12, [{"name": "topic", "topic_id": uuid.UUID(int=0)}], False, False), 3, "c")
    for end in range(len(frame) - 1, 0, -1):
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
