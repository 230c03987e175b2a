"""The hand-written OffsetCommit reader agrees with kio's reader (plus the conversion) for every version."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.apis.groups.offset_commit import to_core
from kcoord.apis.groups.offset_commit_wire import decode_offset_commit
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import decode_request
from tests.protocol.in_process import encode_request

VERSIONS = range(2, 10)

BODIES: list[dict[str, Any]] = [
    {
        "group_id": "g",
        "generation_id_or_member_epoch": 7,
        "member_id": "m-1",
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 42,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    },
    {
        "group_id": "gr\u00f6up-\u00fc" * 20,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": "instance-\u03b1",
        "retention_time": 86_400_000,
        "topics": [
            {
                "name": "orders",
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": 2**40 + p,
                        "committed_leader_epoch": 3,
                        "committed_metadata": None if p % 2 else "meta-" * p,
                    }
                    for p in range(5)
                ],
            },
            {"name": "empty", "partitions": []},
            {
                "name": "x" * 300,
                "partitions": [
                    {
                        "partition_index": 2**31 - 1,
                        "committed_offset": -1,
                        "committed_leader_epoch": 2**31 - 1,
                        "committed_metadata": "m" * 200,
                    }
                ],
            },
        ],
    },
    {
        "group_id": "no-topics",
        "generation_id_or_member_epoch": 1,
        "member_id": "m",
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [],
    },
]


def _frame(version: int, body: dict[str, Any], client_id: str | None = "client-1") -> bytes:
    return encode_request(ApiKey.OFFSET_COMMIT, version, body, 1234, client_id)[4:]  # type: ignore[arg-type]


def _via_kio(frame: bytes) -> tuple[Any, Any]:
    header, request = decode_request(frame)
    return header, to_core(request, header.api_version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("body", BODIES, ids=["one-partition", "many", "no-topics"])
def test_hand_reader_matches_kio(version: int, body: dict[str, Any]) -> None:
    """Every field the core sees, and the header, are what kio's reader and ``to_core`` make of the frame."""
    frame = _frame(version, body)
    assert decode_offset_commit(frame) == _via_kio(frame)


@pytest.mark.parametrize("version", VERSIONS)
def test_null_client_id(version: int) -> None:
    """A header without a client id reads as None, as kio reads it."""
    frame = _frame(version, BODIES[0], client_id=None)
    header, _ = decode_offset_commit(frame)
    assert header.client_id is None
    assert decode_offset_commit(frame) == _via_kio(frame)


def test_unknown_tagged_fields_are_skipped() -> None:
    """v8 tagged fields the reader does not know (partition, topic, body) are skipped, as Kafka's readers do.

    (kio refuses unknown tags, so the reference is the same frame without them.)
    """
    tagged = b"\x01\x05\x03abc"  # one field: tag 5, three bytes
    frame = _frame(8, BODIES[0])
    assert frame.endswith(b"\x00\x00\x00")  # partition, topic and body tagged sections, all empty
    with_tags = frame[:-3] + tagged + tagged + tagged
    assert decode_offset_commit(with_tags) == _via_kio(frame)


@pytest.mark.parametrize("version", VERSIONS)
def test_cut_frames_are_refused(version: int) -> None:
    """Every truncation of a frame raises ValueError (the router then leaves the frame to kio)."""
    frame = _frame(version, BODIES[1])
    for end in range(len(frame) - 1, 0, -7):
        with pytest.raises(ValueError):
            decode_offset_commit(frame[:end])


def test_other_apis_are_refused() -> None:
    """A frame of another API or an unserved version is not read as an OffsetCommit."""
    frame = bytearray(_frame(8, BODIES[0]))
    frame[0:2] = b"\x00\x09"
    with pytest.raises(ValueError):
        decode_offset_commit(bytes(frame))
    frame[0:4] = b"\x00\x08\x00\x0a"  # OffsetCommit v10, not served
    with pytest.raises(ValueError):
        decode_offset_commit(bytes(frame))


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=70)
"""Up to 70 characters (up to 280 bytes): compact lengths of one byte and of two."""
int32 = st.integers(-(2**31), 2**31 - 1)
partitions = st.fixed_dictionaries(
    {
        "partition_index": int32,
        "committed_offset": st.integers(-(2**63), 2**63 - 1),
        "committed_leader_epoch": int32,
        "committed_metadata": st.one_of(st.none(), names),
    }
)
bodies = st.fixed_dictionaries(
    {
        "group_id": names,
        "generation_id_or_member_epoch": int32,
        "member_id": names,
        "group_instance_id": st.one_of(st.none(), names),
        "retention_time": st.integers(-1, 2**40),
        "topics": st.lists(
            st.fixed_dictionaries({"name": names, "partitions": st.lists(partitions, max_size=4)}),
            max_size=3,
        ),
    }
)


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from(VERSIONS), body=bodies, client_id=st.one_of(st.none(), names))
def test_hand_reader_matches_kio_for_any_body(
    version: int, body: dict[str, Any], client_id: str | None
) -> None:
    """For any body of any version (ids and names of any length and script), the reader and kio agree."""
    frame = _frame(version, body, client_id)
    assert decode_offset_commit(frame) == _via_kio(frame)


@settings(max_examples=40, deadline=None)
@given(version=st.sampled_from(VERSIONS), body=bodies)
def test_any_cut_frame_is_refused(version: int, body: dict[str, Any]) -> None:
    """Every truncation of any frame raises ValueError (the router then leaves the frame to kio)."""
    frame = _frame(version, body)
    for end in range(len(frame) - 1, 0, -1):
        with pytest.raises(ValueError):
            decode_offset_commit(frame[:end])
