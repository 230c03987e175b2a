"""A reader for requests that repeat byte for byte: each distinct frame is decoded once.

A member heartbeats with the same bytes every few seconds, a consumer fetches the same offsets and
a client asks the same Metadata question again and again: only the header's correlation id
changes. Decoding (kio's, or a hot API's hand-written reader) then costs more than the rest of
such a request, so a hot API's spec may read its frames through a :class:`RepeatedRequests`: the
bytes after the correlation id (the client id, any header tags, the body) and the version are the
key, and a frame seen before gives back the client id and request object it was decoded into. The
request objects are shared, so handlers treat requests as read-only (they do). A frame not seen
yet goes through the wrapped decoder unchanged, every check included, and is kept if small; a frame
the decoder refuses is never kept. The memo is bounded: past ``max_entries`` it starts again empty.
"""

from __future__ import annotations

import struct
from typing import Any

from kcoord.protocol.codec import RequestHeader, decode_request
from kcoord.protocol.registry import Decoder

__all__ = ["RepeatedRequests"]

_HEADER = struct.Struct(">hhi")
MAX_ENTRIES = 4096
MAX_KEPT_BYTES = 512
"""Larger frames are decoded every time (a request naming many topics is rare and costly to key)."""


class RepeatedRequests:
    """A :data:`~kcoord.protocol.registry.Decoder` for one API key that decodes each frame once."""

    def __init__(
        self, api_key: int, decode: Decoder = decode_request, max_entries: int = MAX_ENTRIES
    ) -> None:
        self._api_key = api_key
        self._decode = decode
        self._max_entries = max_entries
        self._requests: dict[tuple[int, bytes], tuple[str | None, Any]] = {}

    def __len__(self) -> int:
        return len(self._requests)

    def __call__(self, frame: bytes) -> tuple[RequestHeader, Any]:
        try:
            api_key, version, correlation_id = _HEADER.unpack_from(frame, 0)
        except struct.error as exc:
            raise ValueError(f"request header cut off: {exc}") from None
        if api_key != self._api_key:
            raise ValueError(f"api key {api_key} is not {self._api_key}")
        key = (version, frame[8:])
        known = self._requests.get(key)
        if known is not None:
            return RequestHeader(api_key, version, correlation_id, known[0]), known[1]
        header, request = self._decode(frame)
        if len(frame) <= MAX_KEPT_BYTES:
            if len(self._requests) >= self._max_entries:
                self._requests = {}
            self._requests[key] = (header.client_id, request)
        return header, request
