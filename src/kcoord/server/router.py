"""Turns one request frame into one response frame: the single error boundary.

Handlers raise :class:`KafkaError` for errors clients understand; the router turns that into the
API's error response. Anything else is a bug: it is logged with the request's context and
answered as UNKNOWN_SERVER_ERROR where the API has an error form. A frame the router cannot make
sense of (unknown key, unserved version, undecodable body) closes the connection with a log line,
as Apache Kafka does.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import (
    SHORT_HEADER,
    EncodedResponse,
    RequestHeader,
    build,
    decode_request,
    encode_response,
    peek_api,
    response_class,
)
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.registry import ApiRegistry, ApiSpec
from kcoord.server.context import ConnectionInfo, RequestContext

log = structlog.get_logger(__name__)

RequestObserver = Callable[[int, int, int, float], None]
"""``observe(api_key, api_version, error_code, seconds)`` after every answered request."""

ExchangeObserver = Callable[[int, Any, Any], None]
"""``observe(api_key, request, response_body)`` after every handled request (body None for acks=0)."""


_HEADER = struct.Struct(">hhi")
"""API key, version and correlation id: the start of every request frame (as :func:`peek_api`)."""


class CloseConnectionError(Exception):
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
    def __init__(self, registry: ApiRegistry) -> None:
        self._registry = registry
        self._specs = registry.by_key
        self.observers: list[RequestObserver] = []
        self.exchange_observers: list[ExchangeObserver] = []

    async def handle(self, frame: bytes, connection: ConnectionInfo) -> bytes | None:
        """The response frame for ``frame``, None when the API sends none (acks=0).

        Raises only :class:`CloseConnectionError`: whatever else fails on the way (an observer, the
        error form itself) is logged once and closes the connection, so no request goes unanswered
        on a connection left open. One coroutine from frame to answer (the handler's aside): this
        runs for every request, and each layer of coroutine would cost a frame set up and torn down.
        """
        try:
            started = time.perf_counter()
            if len(frame) < 8:  # peek_api inline: this runs for every request
                raise CloseConnectionError(SHORT_HEADER)
            api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
            spec = self._specs.get(api_key)
            if spec is None:
                raise CloseConnectionError(f"unknown api key {api_key}")
            if not spec.min_version <= api_version <= spec.max_version:
                if api_key == ApiKey.API_VERSIONS:
                    self._observe(api_key, api_version, ErrorCode.unsupported_version, started)
                    log.info(
                        "request.answered_with_errors",
                        api=spec.name,
                        version=api_version,
                        correlation_id=correlation_id,
                        peer=connection.client_host,
                        errors=[ErrorCode.unsupported_version.name],
                    )
                    return encode_response(correlation_id, unsupported_api_versions_response(self._registry))
                raise CloseConnectionError(f"{spec.name} v{api_version} is not served")
            try:
                decoder = spec.decoder  # _decode inline
                if decoder is None:
                    header, request = decode_request(frame)
                else:
                    try:
                        header, request = decoder(frame)
                    except ValueError:
                        header, request = decode_request(frame)
            except Exception as exc:  # kio raises several types for malformed bytes
                raise CloseConnectionError(f"undecodable {spec.name} v{api_version}: {exc}") from exc
            ctx = RequestContext(header, connection)
            encoded = False
            try:
                body = await spec.handler(ctx, request)
            except KafkaError as exc:
                body, error = self._error_body(spec, ctx, request, exc.code), int(exc.code)
            except CloseConnectionError:
                raise
            except Exception:
                log.exception(
                    "request.failed",
                    api=spec.name,
                    version=ctx.api_version,
                    correlation_id=ctx.header.correlation_id,
                    client_id=ctx.client_id,
                )
                code = ErrorCode.unknown_server_error
                body, error = self._error_body(spec, ctx, request, code), int(code)
            else:
                encoded = type(body) is EncodedResponse  # the hot APIs' answers
                error = int(body.error_code) if encoded else _top_level_error(body)
            for exchange_observer in self.exchange_observers:
                exchange_observer(api_key, request, body)
            elapsed = time.perf_counter() - started  # _observe inline: this runs for every request
            for observer in self.observers:
                observer(api_key, api_version, error, elapsed)
            if encoded:
                if error:
                    _log_rejections(spec.name, ctx, body)
                answer: bytes = body.frame(correlation_id)  # an EncodedResponse (no cast() call)
                return answer
            _log_rejections(spec.name, ctx, body)
            if body is None:
                return None
            if isinstance(body, EncodedResponse):
                return body.frame(correlation_id)
            try:
                response = build(response_class(api_key, api_version), body)
                return encode_response(correlation_id, response)
            except Exception as exc:
                log.exception("response.encode_failed", api=spec.name, version=api_version)
                raise CloseConnectionError(f"could not encode {spec.name} v{api_version} response") from exc
        except CloseConnectionError:
            raise
        except Exception as exc:
            log.exception("request.unanswerable", peer=connection.client_host)
            raise CloseConnectionError(f"no answer could be made: {exc!r}") from exc

    def refuse(self, frame: bytes, connection: ConnectionInfo, code: ErrorCode) -> bytes:
        """The request's error form with ``code``, without serving it (the SASL gate's refusals).

        Raises :class:`CloseConnectionError` when the frame cannot be read or has no error form.
        """
        try:
            api_key, api_version, correlation_id = peek_api(frame)
        except ValueError as exc:
            raise CloseConnectionError(str(exc)) from exc
        spec = self._registry.get(api_key)
        if spec is None or not spec.min_version <= api_version <= spec.max_version:
            raise CloseConnectionError(f"api key {api_key} v{api_version} is not served")
        try:
            header, request = _decode(spec, frame)
        except Exception as exc:  # kio raises several types for malformed bytes
            raise CloseConnectionError(f"undecodable {spec.name} v{api_version}: {exc}") from exc
        ctx = RequestContext(header=header, connection=connection)
        body = self._error_body(spec, ctx, request, code)
        return encode_response(correlation_id, build(response_class(api_key, api_version), body))

    @property
    def pipelined_writes(self) -> frozenset[int]:
        """The API keys whose requests a connection may start while an earlier one of the same API
        waits for its durability (:attr:`ApiSpec.pipelined`)."""
        return self._registry.pipelined_keys

    def serves(self, api_key: int, api_version: int) -> bool:
        """Whether a request of this key and version is answered (rather than refused)."""
        spec = self._registry.get(api_key)
        return spec is not None and spec.min_version <= api_version <= spec.max_version

    def _error_body(self, spec: ApiSpec, ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
        if spec.error_response is not None:
            try:
                return spec.error_response(request, code)
            except Exception as exc:
                raise CloseConnectionError(
                    f"{spec.name} v{ctx.api_version} failed with {code.name} and its error form "
                    f"could not be built ({exc!r})"
                ) from exc
        if any(
            f == "error_code" for f in getattr(response_class(spec.key, ctx.api_version), "__slots__", ())
        ):
            return {"error_code": code}
        raise CloseConnectionError(f"{spec.name} failed with {code.name} and has no error form")

    def _observe(self, api_key: int, api_version: int, error: int, started: float) -> None:
        elapsed = time.perf_counter() - started
        for observer in self.observers:
            observer(api_key, api_version, error, elapsed)


def _decode(spec: ApiSpec, frame: bytes) -> tuple[RequestHeader, Any]:
    """The API's own fast reader where it has one (falling back to kio on a frame it declines)."""
    if spec.decoder is not None:
        try:
            return spec.decoder(frame)
        except ValueError:
            pass
    return decode_request(frame)


def _top_level_error(body: Any) -> int:
    if isinstance(body, dict):
        return int(body.get("error_code", 0))
    return int(getattr(body, "error_code", 0) or 0)


_ROUTINE_ERRORS = frozenset(
    {
        ErrorCode.rebalance_in_progress,
        ErrorCode.member_id_required,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.unknown_member_id,
        ErrorCode.illegal_generation,
        ErrorCode.fenced_instance_id,
        ErrorCode.group_id_not_found,
    }
)
"""Errors that are part of the group protocol's normal flow: logged at debug, not info."""


_SCALARS = (bytes, str, int, float)
_SEQUENCES = (list, tuple)
"""Type tuples, not unions: ``isinstance`` with a union walks it in Python-level steps (0.26 us
against 0.08 us here), and :func:`_collect_errors` runs for every field of every answer body."""


def _collect_errors(value: Any, found: set[ErrorCode], depth: int = 0) -> None:
    """Every non-zero ``error_code`` in a response body (dicts, lists and core dataclasses)."""
    if depth > 5 or value is None or isinstance(value, _SCALARS):
        return
    if isinstance(value, dict):
        code = value.get("error_code")
        items: Any = value.values()
    elif isinstance(value, _SEQUENCES):
        code, items = None, value
    elif hasattr(value, "__dataclass_fields__"):
        code = getattr(value, "error_code", None)
        items = (getattr(value, name) for name in value.__dataclass_fields__)
    else:
        return
    if code:
        found.add(ErrorCode(int(code)))
    for item in items:
        _collect_errors(item, found, depth + 1)


def _log_rejections(api: str, ctx: RequestContext, body: Any) -> None:
    """One log line per request answered with an error, naming the errors (bad input is logged)."""
    found: set[ErrorCode] = set()
    if isinstance(body, EncodedResponse):
        if body.error_code == ErrorCode.none:
            return
        found.add(body.error_code)
    else:
        _collect_errors(body, found)
    if not found:
        return
    emit = log.debug if found <= _ROUTINE_ERRORS else log.info
    emit(
        "request.answered_with_errors",
        api=api,
        version=ctx.api_version,
        correlation_id=ctx.header.correlation_id,
        client_id=ctx.client_id,
        peer=ctx.client_host,
        principal=str(ctx.principal),
        errors=sorted(code.name for code in found),
    )
