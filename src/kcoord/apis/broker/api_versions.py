"""ApiVersions (key 18), versions 0-4.

- v0: the list of APIs with their version ranges.
- v1: adds throttle_time_ms.
- v3: flexible; the request carries the client's software name and version.
- v4: no change to the body (lets clients learn that error 35 carries the ApiVersions range).

The response always uses response header v0, whatever the version (kio encodes it so). An
unsupported version is answered by the router with error 35 in the v0 body layout. Optional
tagged fields (supported features) are left at their defaults so that they are not written:
kcat's librdkafka 2.0.2 cannot read them.
"""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import EncodedResponse, build, response_class
from kcoord.protocol.registry import ApiRegistry, ApiSpec
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "api_keys": []}


def api(registry: ApiRegistry) -> ApiSpec:
    """ApiVersions answering with what ``registry`` serves (itself included, once added)."""
    handler = functools.partial(handle_api_versions, registry=registry, answers={})
    return ApiSpec(ApiKey.API_VERSIONS, "ApiVersions", 0, 4, handler, _error_response)


async def handle_api_versions(
    ctx: RequestContext, request: Any, *, registry: ApiRegistry, answers: dict[int, EncodedResponse]
) -> EncodedResponse:
    """``answers`` caches the answer per version: the registry is complete before the first request."""
    answer = answers.get(ctx.api_version)
    if answer is None:
        answer = answers[ctx.api_version] = EncodedResponse.of(
            build(
                response_class(ApiKey.API_VERSIONS, ctx.api_version),
                {
                    "error_code": 0,
                    "api_keys": [
                        {"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
                        for s in registry.specs()
                    ],
                },
            )
        )
    return answer
