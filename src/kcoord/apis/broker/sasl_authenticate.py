"""SaslAuthenticate (key 36), versions 0-2: one SASL token in, the server's token out.

- v0: ``auth_bytes`` in both directions, an error code and message.
- v1: ``session_lifetime_ms`` (KIP-368); kcoord does not expire sessions, so it is 0.
- v2: flexible versions.

A failed exchange answers SASL_AUTHENTICATION_FAILED (after the configured delay); the connection
serves nothing afterwards and is closed at its next request.
"""

from __future__ import annotations

from typing import Any

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.registry import ApiSpec
from kcoord.security.sasl import AuthenticationFailedError, IllegalSaslStateError
from kcoord.server.context import RequestContext


def sasl_authenticate_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "error_message": None, "auth_bytes": b"", "session_lifetime": 0}


def api() -> ApiSpec:
    return ApiSpec(
        ApiKey.SASL_AUTHENTICATE,
        "SaslAuthenticate",
        0,
        2,
        handle_sasl_authenticate,
        sasl_authenticate_error_response,
    )


def _error(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "auth_bytes": b"", "session_lifetime": 0}


async def handle_sasl_authenticate(ctx: RequestContext, request: Any) -> dict[str, Any]:
    session = ctx.connection.sasl
    if session is None:
        return _error(ErrorCode.illegal_sasl_state, "SaslAuthenticate on a listener without SASL")
    try:
        answer = await session.authenticate(bytes(request.auth_bytes))
    except IllegalSaslStateError as exc:
        return _error(ErrorCode.illegal_sasl_state, str(exc))
    except AuthenticationFailedError as exc:
        return _error(ErrorCode.sasl_authentication_failed, str(exc))
    if session.principal is not None:
        ctx.connection.principal = session.principal
    return {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": answer, "session_lifetime": 0}
