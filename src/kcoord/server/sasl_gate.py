"""Stands before the router on SASL listeners: nothing but the SASL exchange until it succeeds.

The sequence Kafka's ``SaslServerAuthenticator`` accepts, and what breaks it:

1. before SaslHandshake: ApiVersions (once answered, not again) and SaslHandshake. Anything else,
   SaslAuthenticate included, closes the connection unanswered;
2. SaslHandshake naming a mechanism that is not enabled is answered UNSUPPORTED_SASL_MECHANISM
   with the enabled list (after the failed-authentication delay, counted as a failure) and the
   connection is then closed;
3. after a v1 SaslHandshake only SaslAuthenticate is served; any other request is answered with
   its error form, ILLEGAL_SASL_STATE, and the connection is then closed. After a v0 SaslHandshake
   the frames are bare SASL tokens (no Kafka header), answered as bare size-prefixed tokens; a
   failure there closes the connection, the only signal v0 has;
4. a failed exchange is answered (after the configured delay) and the connection is then closed.

Every break of this order is a failed authentication, as in Kafka: logged, counted and delayed by
``connection.failed.authentication.delay.ms`` before the answer or the close.

Once authenticated, every frame goes straight to the router.
"""

from __future__ import annotations

import asyncio
import struct

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import peek_api
from kcoord.protocol.errors import ErrorCode
from kcoord.security.sasl import AuthenticationFailedError, SaslSession, SaslState
from kcoord.server.context import ConnectionInfo
from kcoord.server.router import CloseConnectionError, Router

_SIZE = struct.Struct(">i")
_BEFORE_HANDSHAKE = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE})


class SaslGate:
    """The frame handler of one connection on a SASL listener."""

    def __init__(self, router: Router, session: SaslSession, writer: asyncio.StreamWriter) -> None:
        self._router = router
        self._session = session
        self._writer = writer
        self._versions_answered = False

    async def handle(self, frame: bytes, connection: ConnectionInfo) -> bytes | None:
        session = self._session
        if session.state is SaslState.AUTHENTICATED:
            return await self._router.handle(frame, connection)
        if session.state is SaslState.FAILED:
            raise CloseConnectionError("request after failed authentication")
        if session.raw_tokens:
            return await self._raw_token(frame, connection)
        try:
            api_key, api_version, _ = peek_api(frame)
        except ValueError as exc:
            raise CloseConnectionError(f"before authentication: {exc}") from exc
        if session.state is SaslState.HANDSHAKE:
            problem = self._before_handshake_problem(api_key, api_version)
            if problem is not None:
                await session.break_off(problem)
                raise CloseConnectionError(problem)
        elif api_key != ApiKey.SASL_AUTHENTICATE:
            await session.break_off(f"api key {api_key} during SASL authentication")
            self._close_after_answer()
            return self._router.refuse(frame, connection, ErrorCode.illegal_sasl_state)
        answer = await self._router.handle(frame, connection)
        if session.failed:
            self._close_after_answer()
        return answer

    @property
    def pipelined_writes(self) -> frozenset[int]:
        """The router's: the connection pipelines only once authenticated, when frames go straight to it."""
        return self._router.pipelined_writes

    def _before_handshake_problem(self, api_key: int, api_version: int) -> str | None:
        """Why this request may not come before SaslHandshake; None when it may."""
        if api_key not in _BEFORE_HANDSHAKE:
            return f"api key {api_key} before SaslHandshake"
        if api_key == ApiKey.API_VERSIONS and self._router.serves(api_key, api_version):
            if self._versions_answered:
                return "a second ApiVersions before SaslHandshake"
            self._versions_answered = True
        return None

    def _close_after_answer(self) -> None:
        # The connection writes the answer as soon as the handler returns, before the loop runs
        # callbacks; closing the transport then flushes the answer and ends the connection.
        asyncio.get_running_loop().call_soon(self._writer.close)

    async def _raw_token(self, frame: bytes, connection: ConnectionInfo) -> bytes:
        try:
            answer = await self._session.authenticate(frame)
        except AuthenticationFailedError as exc:
            raise CloseConnectionError(str(exc)) from exc
        if self._session.principal is not None:
            connection.principal = self._session.principal
        return _SIZE.pack(len(answer)) + answer
