"""SaslHandshake (key 17), versions 0-1.

- v0: the mechanism is chosen; the SASL tokens that follow are bare size-prefixed frames.
- v1: the same answer; the tokens follow in SaslAuthenticate requests.

The answer lists the enabled mechanisms. On a listener without SASL, or once the connection has
authenticated, the answer is ILLEGAL_SASL_STATE, as Kafka's.
"""

from __future__ import annotations

from typing import Any

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.registry import ApiSpec
from kcoord.security.sasl import IllegalSaslStateError
from kcoord.server.context import RequestContext


def sasl_handshake_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "mechanisms": []}


def api() -> ApiSpec:
    return ApiSpec(
        ApiKey.SASL_HANDSHAKE, "SaslHandshake", 0, 1, handle_sasl_handshake, sasl_handshake_error_response
    )


async def handle_sasl_handshake(ctx: RequestContext, request: Any) -> dict[str, Any]:
    session = ctx.connection.sasl
    if session is None:
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}
    mechanisms = session.enabled_mechanisms
    try:
        chosen = await session.handshake(request.mechanism, ctx.api_version)
    except IllegalSaslStateError:
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": mechanisms}
    error = ErrorCode.none if chosen else ErrorCode.unsupported_sasl_mechanism
    return {"error_code": error, "mechanisms": mechanisms}
