"""Encoded answers of hot APIs, reused: an answer that repeats is encoded once.

A consumer commits the same partitions again and again and, while nothing changes, gets the same
OffsetCommit answer every time (and the same OffsetFetch answer until the next commit). kio's
generic build-and-encode costs more than the rest of such a request, so a hot API's edge module
keys each answer by the values that make it up and keeps the encoded bytes; only the response
header (the correlation id) is written per request. The cache is bounded: past ``max_entries`` the
oldest entry goes.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.codec import EncodedResponse, build, encode_entity, response_class

__all__ = ["ResponseCache"]

DEFAULT_MAX_ENTRIES = 4096


class ResponseCache:
    """Encoded responses of one API by (version, key)."""

    def __init__(self, api_key: int, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self._api_key = api_key
        self._max_entries = max_entries
        self._entries: dict[tuple[int, Hashable], EncodedResponse] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, api_version: int, key: Hashable) -> EncodedResponse | None:
        """The answer kept for ``key``, if any (then the caller need not work out its error)."""
        return self._entries.get((api_version, key))

    def encoded(self, api_version: int, key: Hashable, body: Any, error_code: ErrorCode) -> EncodedResponse:
        """The encoded ``body`` for ``key``: ``body`` must be what ``key`` determines.

        ``error_code`` is the first error in ``body`` (the router logs answers that carry one).
        """
        entry = self._entries.get((api_version, key))
        if entry is not None:
            return entry
        cls = response_class(self._api_key, api_version)
        response = build(cls, body)
        entry = EncodedResponse(
            encode_entity(response), bool(cls.__header_schema__.__flexible__), error_code, body
        )
        if len(self._entries) >= self._max_entries:
            del self._entries[next(iter(self._entries))]
        self._entries[(api_version, key)] = entry
        return entry
