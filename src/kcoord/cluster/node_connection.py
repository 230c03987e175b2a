"""One connection from this node to another node of the cluster, for the requests nodes send each
other (WriteTxnMarkers, Read/WriteShareGroupState): one request at a time, as a client does, each
bounded in time.

The connection opens on first use. A call that fails (refused, reset, timed out) raises, and the
caller drops the connection (:meth:`NodeConnection.close`) so the next call reconnects, perhaps
to another node once the membership has moved the partition. Only plaintext listeners are reached
this way: kcoord has no inter-node credentials.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from kcoord.protocol.codec import build, request_class, response_class

__all__ = ["CALL_FAILURES", "NodeConnection"]

CALL_TIMEOUT_S = 10.0
CALL_FAILURES = (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError)
"""What a failed call raises: the node is gone, unreachable or too slow."""


class NodeConnection:
    """Requests of one API version to one node, in order, over one connection."""

    def __init__(self, host: str, port: int, api_key: int, version: int, client_id: str) -> None:
        self.address = (host, port)
        self._api = (api_key, version)
        self._client_id = client_id
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._lock = asyncio.Lock()
        self._correlation = itertools.count(1)

    async def call(self, body: dict[str, Any]) -> Any:
        """Send one request built from ``body``; its decoded response."""
        async with self._lock:
            if self._streams is None:
                self._streams = await asyncio.wait_for(asyncio.open_connection(*self.address), CALL_TIMEOUT_S)
            reader, writer = self._streams
            writer.write(self._encode(body, next(self._correlation)))
            await writer.drain()
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), CALL_TIMEOUT_S))[0]
            frame = await asyncio.wait_for(reader.readexactly(size), CALL_TIMEOUT_S)
        cls = response_class(*self._api)
        offset = 5 if cls.__header_schema__.__flexible__ else 4  # correlation id, empty tagged fields
        response, _ = entity_reader(cls)(frame, offset)
        return response

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None

    def _encode(self, body: dict[str, Any], correlation_id: int) -> bytes:
        api_key, version = self._api
        cls = request_class(api_key, version)
        assert cls is not None
        header_cls = cls.__header_schema__
        header = header_cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=self._client_id,
        )
        buffer = io.BytesIO()
        entity_writer(header_cls)(buffer, header)
        entity_writer(cls)(buffer, build(cls, body))
        payload = buffer.getvalue()
        return struct.pack(">i", len(payload)) + payload
