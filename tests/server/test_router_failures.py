"""The router's promise: every request is answered or its connection closed, whatever fails on the way."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kcoord.protocol.registry import ApiRegistry, ApiSpec
from kcoord.server.context import ConnectionInfo
from kcoord.server.router import CloseConnectionError, Router
from tests.support.hostile_frames import request_payload

HEARTBEAT = 12
HEARTBEAT_V4_BODY = b"\x02g\x00\x00\x00\x01\x02m\x00\x00"


def _registry(handler: Any, error_response: Any) -> ApiRegistry:
    return ApiRegistry([ApiSpec(HEARTBEAT, "Heartbeat", 0, 4, handler, error_response)])


async def _failing_handler(ctx: Any, request: Any) -> Any:
    raise RuntimeError("handler bug")


def _failing_error_form(request: Any, code: ErrorCode) -> dict[str, Any]:
    raise AttributeError("the error form read a field the request does not have")


async def test_error_form_that_raises_closes_the_connection() -> None:
    """When the handler and then its error form both raise, the router asks for a close, naming both."""
    router = Router(_registry(_failing_handler, _failing_error_form))
    with pytest.raises(CloseConnectionError, match="error form could not be built"):
        await router.handle(
            request_payload(HEARTBEAT, 4, HEARTBEAT_V4_BODY), ConnectionInfo(1, "127.0.0.1", 1)
        )


async def test_failing_observer_closes_the_connection() -> None:
    """Anything else that fails (here an observer) becomes a close, never another exception type."""

    async def handler(ctx: Any, request: Any) -> Any:
        return {"error_code": ErrorCode.none}

    router = Router(_registry(handler, None))

    def observer(*args: Any) -> None:
        raise ValueError("observer bug")

    router.observers.append(observer)
    with pytest.raises(CloseConnectionError, match="no answer could be made"):
        await router.handle(
            request_payload(HEARTBEAT, 4, HEARTBEAT_V4_BODY), ConnectionInfo(1, "127.0.0.1", 1)
        )


async def test_handler_failure_with_a_working_error_form_is_answered() -> None:
    """A handler that raises is still answered, as UNKNOWN_SERVER_ERROR in the API's error form."""
    router = Router(_registry(_failing_handler, lambda request, code: {"error_code": code}))
    answer = await router.handle(
        request_payload(HEARTBEAT, 4, HEARTBEAT_V4_BODY), ConnectionInfo(1, "127.0.0.1", 1)
    )
    assert answer is not None
    assert answer[-3:-1] == int(ErrorCode.unknown_server_error).to_bytes(2, "big", signed=True)
