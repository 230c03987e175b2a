"""The request guard: every declared length is bounded by the frame before kio reads it.

kio's native reader aborts the process on an array length it cannot allocate, so none of these
tests hands a hostile frame to kio without the guard in front of it.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial.errors import InvalidUnicode

from kcoord.protocol.codec import decode_request, encode_entity, request_class
from kcoord.protocol.guard import MalformedRequestError, check_request, compile_request
from tests.support.fuzz_frames import advertised, fuzz_payload, random_entity, valid_body
from tests.support.hostile_frames import ALL, ALLOCATION_BOMBS, NULL_ARRAYS, request_payload

ADVERTISED = advertised()


def _cls(api_key: int, version: int) -> type:
    cls = request_class(api_key, version)
    assert cls is not None
    return cls


@pytest.mark.parametrize("frame", ALL, ids=[f.name for f in ALL])
def test_known_hostile_frames_are_refused(frame: object) -> None:
    """Each frame that crashed or wedged kcoord is refused by the guard, and decode_request raises for it."""
    api_key, version, body = frame.api_key, frame.version, frame.body  # type: ignore[attr-defined]
    payload = request_payload(api_key, version, body)
    with pytest.raises(MalformedRequestError):
        check_request(_cls(api_key, version), payload)
    with pytest.raises(MalformedRequestError):
        decode_request(payload)


def test_refusals_name_the_field() -> None:
    """The message names the field and what it declared, so the one log line says what was wrong."""
    bomb = ALLOCATION_BOMBS[0]
    with pytest.raises(MalformedRequestError, match=r"OffsetFetchRequest\.topics: varint 13421772799"):
        check_request(_cls(bomb.api_key, bomb.version), request_payload(*bomb[1:]))
    null = NULL_ARRAYS[0]
    with pytest.raises(MalformedRequestError, match=r"ProduceRequest\.topic_data: null in a non-nullable"):
        check_request(_cls(null.api_key, null.version), request_payload(*null[1:]))


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED)
def test_every_advertised_schema_compiles(api_key: int, version: int) -> None:
    """The guard knows every field type of every advertised request (a new type fails here, not live)."""
    assert compile_request(_cls(api_key, version))


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED)
def test_valid_requests_pass_and_every_prefix_is_refused(api_key: int, version: int) -> None:
    """Random schema-valid requests pass and decode; every strict prefix of one is refused."""
    rng = random.Random(api_key * 100 + version)
    cls = _cls(api_key, version)
    for _ in range(5):
        payload = request_payload(api_key, version, valid_body(api_key, version, rng))
        check_request(cls, payload)
        decode_request(payload)
        for cut in range(len(payload)):
            with pytest.raises(MalformedRequestError):
                check_request(cls, payload[:cut])


def test_trailing_bytes_are_allowed() -> None:
    """Bytes after the body pass, as Kafka's readers allow (librdkafka sends some after Metadata)."""
    payload = request_payload(3, 12, valid_body(3, 12, random.Random(3))) + b"\x00\x00\x00"
    check_request(_cls(3, 12), payload)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\x02g\x00\x00\x00\x01\x02m\x00\x01\x00\x05\x80", "tagged field whose size overruns the frame"),
        (b"\x02g\x00\x00\x00\x01\x02m\x00\xff\xff\xff\xff\xff\x01", "tagged-field count varint of six bytes"),
        (b"\x80\x80\x80\x80\x10", "string length past 32 bits"),
        (b"\x00\x00\x00\x00\x01\x02m\x00\x00", "null group id"),
    ],
)
def test_heartbeat_v4_refusals(body: bytes, reason: str) -> None:
    """Strings, varints and tagged fields of a flexible request are bounded too."""
    with pytest.raises(MalformedRequestError):
        check_request(_cls(12, 4), request_payload(12, 4, body))


def test_known_tagged_field_is_walked_within_its_size() -> None:
    """Fetch v12's tagged cluster_id: a string longer than its tag's declared size is refused."""
    cls = _cls(1, 12)
    request = dataclasses.replace(random_entity(cls, random.Random(12)), cluster_id=None)
    valid = request_payload(1, 12, encode_entity(request))
    assert valid.endswith(b"\x00"), "the top-level tagged fields close the body"
    tagged = valid[:-1] + b"\x01\x00\x02\x05abcd"
    with pytest.raises(MalformedRequestError, match="tag 0: payload overruns its declared size"):
        check_request(_cls(1, 12), tagged)
    fitting = valid[:-1] + b"\x01\x00\x05\x05abcd"
    check_request(_cls(1, 12), fitting)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ADVERTISED), st.randoms(use_true_random=False))
def test_whatever_passes_the_guard_decodes_or_fails_on_a_value(
    key_version: tuple[int, int], rng: random.Random
) -> None:
    """A fuzzed frame is refused by the guard, or decodes, or kio refuses one *value* the guard does
    not judge (a string that is not UTF-8, a boolean byte other than 0 or 1); never a length or a
    null, which are the guard's to refuse."""
    api_key, version = key_version
    payload = fuzz_payload(api_key, version, rng)
    try:
        check_request(_cls(api_key, version), payload)
    except MalformedRequestError:
        return
    try:
        decode_request(payload)
    except InvalidUnicode:
        return
    except ValueError as exc:
        assert str(exc) == "Invalid boolean value", repr(exc)


def test_strings_longer_than_kafka_allows_are_refused() -> None:
    """A compact string of 32768 bytes is refused as Kafka's readers do and 32767 passes."""
    group = b"g" * 32767
    fits = b"\x80\x80\x02" + group + b"\x00\x00\x00\x01\x02m\x00\x00"
    check_request(_cls(12, 4), request_payload(12, 4, fits))
    too_long = b"\x81\x80\x02" + group + b"g\x00\x00\x00\x01\x02m\x00\x00"
    with pytest.raises(MalformedRequestError, match="string of 32768 bytes"):
        check_request(_cls(12, 4), request_payload(12, 4, too_long))


def test_struct_fields_are_walked_in_place() -> None:
    """Fetch v15 (not served, but in kio) carries a tagged struct: valid requests pass, prefixes do not."""
    cls = _cls(1, 15)
    rng = random.Random(15)
    for _ in range(20):
        payload = request_payload(1, 15, valid_body(1, 15, rng))
        check_request(cls, payload)
        for cut in range(len(payload)):
            with pytest.raises(MalformedRequestError):
                check_request(cls, payload[:cut])
