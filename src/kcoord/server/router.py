"""Turns one request frame into one response frame: the single error boundary.

Handlers raise :class:`KafkaError` for errors clients understand; the router turns that into the
API's error response. Anything else is a bug: it is logged with the request's context and
answered as UNKNOWN_SERVER_ERROR where the API has an error form. A frame the router cannot make
sense of (unknown key, unserved version, undecodable body) closes the connection with a log line,
as Apache Kafka does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import build, decode_request, encode_response, peek_api, response_class
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.registry import REGISTRY, ApiRegistry, ApiSpec
from kcoord.server.context import ConnectionInfo, RequestContext

if TYPE_CHECKING:
    from kcoord.app import App

log = structlog.get_logger(__name__)

RequestObserver = Callable[[int, int, int, float], None]
"""``observe(api_key, api_version, error_code, seconds)`` after every answered request."""


class CloseConnection(Exception):
    """The connection must be closed (after a log line); nothing is sent back."""


def unsupported_api_versions_response(registry: ApiRegistry) -> Any:
    """ApiVersions error 35 in the v0 body layout, so a client can retry with a version we serve."""
    return build(
        response_class(ApiKey.API_VERSIONS, 0),
        {
            "error_code": ErrorCode.unsupported_version,
            "api_keys": [
                {"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
                for s in registry.specs()
            ],
        },
    )


class Router:
    def __init__(self, app: App, registry: ApiRegistry = REGISTRY) -> None:
        self._app = app
        self._registry = registry
        self.observers: list[RequestObserver] = []

    async def handle(self, frame: bytes, connection: ConnectionInfo) -> bytes | None:
        """The response frame for ``frame``, None when the API sends none (acks=0)."""
        started = time.perf_counter()
        try:
            api_key, api_version, correlation_id = peek_api(frame)
        except ValueError as exc:
            raise CloseConnection(str(exc)) from exc
        spec = self._registry.get(api_key)
        if spec is None:
            raise CloseConnection(f"unknown api key {api_key}")
        if not spec.min_version <= api_version <= spec.max_version:
            if api_key == ApiKey.API_VERSIONS:
                self._observe(api_key, api_version, ErrorCode.unsupported_version, started)
                return encode_response(correlation_id, unsupported_api_versions_response(self._registry))
            raise CloseConnection(f"{spec.name} v{api_version} is not served")
        try:
            header, request = decode_request(frame)
        except Exception as exc:  # kio raises several types for malformed bytes
            raise CloseConnection(f"undecodable {spec.name} v{api_version}: {exc}") from exc
        ctx = RequestContext(header=header, connection=connection, app=self._app)
        body, error = await self._call(spec, ctx, request)
        self._observe(api_key, api_version, error, started)
        if body is None:
            return None
        try:
            response = build(response_class(api_key, api_version), body)
            return encode_response(correlation_id, response)
        except Exception as exc:
            log.exception("response.encode_failed", api=spec.name, version=api_version)
            raise CloseConnection(f"could not encode {spec.name} v{api_version} response") from exc

    async def _call(self, spec: ApiSpec, ctx: RequestContext, request: Any) -> tuple[Any, int]:
        try:
            body = await spec.handler(ctx, request)
        except KafkaError as exc:
            return self._error_body(spec, ctx, request, exc.code), int(exc.code)
        except CloseConnection:
            raise
        except Exception:
            log.exception(
                "request.failed",
                api=spec.name,
                version=ctx.api_version,
                correlation_id=ctx.header.correlation_id,
                client_id=ctx.client_id,
            )
            return self._error_body(spec, ctx, request, ErrorCode.unknown_server_error), int(
                ErrorCode.unknown_server_error
            )
        return body, _top_level_error(body)

    def _error_body(self, spec: ApiSpec, ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
        if spec.error_response is not None:
            return spec.error_response(request, code)
        if any(f == "error_code" for f in getattr(response_class(spec.key, ctx.api_version), "__slots__", ())):
            return {"error_code": code}
        raise CloseConnection(f"{spec.name} failed with {code.name} and has no error form")

    def _observe(self, api_key: int, api_version: int, error: int, started: float) -> None:
        elapsed = time.perf_counter() - started
        for observer in self.observers:
            observer(api_key, api_version, error, elapsed)


def _top_level_error(body: Any) -> int:
    if isinstance(body, dict):
        return int(body.get("error_code", 0))
    return int(getattr(body, "error_code", 0) or 0)
