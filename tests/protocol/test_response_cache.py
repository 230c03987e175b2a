"""Cached answers are the bytes kio would encode, reused per key, and the cache stays bounded."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import build, encode_entity, response_class
from kcoord.protocol.response_cache import ResponseCache


def body(offset: int) -> dict[str, object]:
    partition = {"partition_index": 0, "error_code": ErrorCode.none}
    return {"topics": [{"name": f"t{offset}", "partitions": [partition]}]}


def test_an_answer_is_encoded_once_per_key_and_matches_kio() -> None:
    """The same key returns the same object, whose body is kio's encoding of the first body."""
    cache = ResponseCache(ApiKey.OFFSET_COMMIT)
    first = cache.encoded(8, "k", body(1), ErrorCode.none)
    assert cache.encoded(8, "k", body(1), ErrorCode.none) is first
    expected = encode_entity(build(response_class(ApiKey.OFFSET_COMMIT, 8), body(1)))
    assert first.body == expected and first.flexible_header and first.source == body(1)
    assert cache.encoded(7, "k", body(1), ErrorCode.none) is not first, "versions are cached apart"


def test_the_cache_drops_its_oldest_entry_past_its_bound() -> None:
    """Past max_entries the oldest key is re-encoded on its next use."""
    cache = ResponseCache(ApiKey.OFFSET_COMMIT, max_entries=2)
    oldest = cache.encoded(8, 1, body(1), ErrorCode.none)
    cache.encoded(8, 2, body(2), ErrorCode.none)
    cache.encoded(8, 3, body(3), ErrorCode.none)
    assert len(cache) == 2
    assert cache.encoded(8, 1, body(1), ErrorCode.none) is not oldest
