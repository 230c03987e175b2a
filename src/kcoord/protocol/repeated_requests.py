"""A reader for requests that repeat byte for byte: each distinct body is decoded by kio once.

A client asks the same Metadata question (its topics, the same flags) again and again; only the
header's correlation id changes. kio's decoding (with the guard in front of it) costs more than the
rest of such a request once its answer is cached, so a hot API's spec may read its frames through a
:class:`RepeatedRequests`: the header is read by hand, the body bytes after it are the key, and a
body seen before gives back the same (immutable) kio request object. A body not seen yet goes
through :func:`~kcoord.protocol.codec.decode_request` unchanged (every check included) and is kept
if small. The memo is bounded: past ``max_entries`` it starts again empty.
"""

from __future__ import annotations

import struct
from typing import Any

from kcoord.protocol.codec import RequestHeader, decode_request, request_class

__all__ = ["RepeatedRequests"]

_HEADER = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
MAX_ENTRIES = 1024
MAX_BODY_BYTES = 1024
"""Larger bodies are decoded every time (a request naming many topics is rare and costly to key)."""


class RepeatedRequests:
    """A :data:`~kcoord.protocol.registry.Decoder` for one API key that decodes each body once."""

    def __init__(self, api_key: int, max_entries: int = MAX_ENTRIES) -> None:
        self._api_key = api_key
        self._max_entries = max_entries
        self._requests: dict[tuple[int, bytes], Any] = {}
        self._flexible_header: dict[int, bool] = {}

    def __len__(self) -> int:
        return len(self._requests)

    def __call__(self, frame: bytes) -> tuple[RequestHeader, Any]:
        try:
            api_key, version, correlation_id = _HEADER.unpack_from(frame, 0)
            size = _I16.unpack_from(frame, 8)[0]
        except struct.error as exc:
            raise ValueError(f"request header cut off: {exc}") from None
        if api_key != self._api_key:
            raise ValueError(f"api key {api_key} is not {self._api_key}")
        start = 10 + max(size, 0)
        flexible = self._flexible_header.get(version)
        if flexible is None:
            flexible = self._flexible_header[version] = _has_flexible_header(api_key, version)
        if flexible:
            if start >= len(frame) or frame[start] != 0:
                return self._decode(frame, None)  # tagged header fields: left to kio, not kept
            start += 1
        if start > len(frame):
            raise ValueError("request header overruns its frame")
        key = (version, bytes(frame[start:]))
        request = self._requests.get(key)
        if request is None:
            return self._decode(frame, key)
        client_id = None if size < 0 else bytes(frame[10 : 10 + size]).decode("utf-8")
        return RequestHeader(api_key, version, correlation_id, client_id), request

    def _decode(self, frame: bytes, key: tuple[int, bytes] | None) -> tuple[RequestHeader, Any]:
        header, request = decode_request(frame)
        if key is not None and len(key[1]) <= MAX_BODY_BYTES:
            if len(self._requests) >= self._max_entries:
                self._requests = {}
            self._requests[key] = request
        return header, request


def _has_flexible_header(api_key: int, version: int) -> bool:
    cls = request_class(api_key, version)
    if cls is None:
        raise ValueError(f"no schema for api key {api_key} v{version}")
    return bool(cls.__header_schema__.__flexible__)
