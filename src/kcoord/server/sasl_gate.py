"""Stands before the router on SASL listeners: nothing but the SASL exchange until it succeeds.

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate reach the router; any
other request closes the connection with a log line, as Kafka's ``SaslServerAuthenticator``
does. After a v0 SaslHandshake the frames are bare SASL tokens (no Kafka header), answered as
bare size-prefixed tokens; a failure there closes the connection, the only signal v0 has.
A failed exchange is answered (after the configured delay) and the connection is then closed, as
Kafka closes it. Once authenticated, every frame goes straight to the router.
"""

from __future__ import annotations

import asyncio
import struct

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import peek_api
from kcoord.security.sasl import AuthenticationFailedError, SaslSession, SaslState
from kcoord.server.context import ConnectionInfo
from kcoord.server.router import CloseConnectionError, Router

_SIZE = struct.Struct(">i")
_BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class SaslGate:
    """The frame handler of one connection on a SASL listener."""

    def __init__(self, router: Router, session: SaslSession, writer: asyncio.StreamWriter) -> None:
        self._router = router
        self._session = session
        self._writer = writer

    async def handle(self, frame: bytes, connection: ConnectionInfo) -> bytes | None:
        session = self._session
        if session.state is SaslState.AUTHENTICATED:
            return await self._router.handle(frame, connection)
        if session.state is SaslState.FAILED:
            raise CloseConnectionError("request after failed authentication")
        if session.raw_tokens:
            return await self._raw_token(frame, connection)
        try:
            api_key, _, _ = peek_api(frame)
        except ValueError as exc:
            raise CloseConnectionError(f"before authentication: {exc}") from exc
        if api_key not in _BEFORE_AUTHENTICATION:
            raise CloseConnectionError(f"api key {api_key} before SASL authentication")
        answer = await self._router.handle(frame, connection)
        if session.failed:
            # The connection writes the answer as soon as this returns, before the loop runs
            # callbacks; closing the transport then flushes the answer and ends the connection.
            asyncio.get_running_loop().call_soon(self._writer.close)
        return answer

    async def _raw_token(self, frame: bytes, connection: ConnectionInfo) -> bytes:
        try:
            answer = await self._session.authenticate(frame)
        except AuthenticationFailedError as exc:
            raise CloseConnectionError(str(exc)) from exc
        if self._session.principal is not None:
            connection.principal = self._session.principal
        return _SIZE.pack(len(answer)) + answer
