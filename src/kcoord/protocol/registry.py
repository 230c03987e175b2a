"""Which APIs kcoord serves, at which versions, and by which handler.

Each API module registers its handler with the versions it implements; that registration is
the only source of the ApiVersions answer, so kcoord never advertises a version it does not
serve (clients use whatever is advertised).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

Handler = Callable[[Any, Any], Awaitable[Any]]
"""``async def handle(ctx, request) -> mapping | kio entity``: the response body."""

ErrorResponder = Callable[[Any, ErrorCode], Mapping[str, Any]]
"""Builds the whole response of an API from its request and one error code."""


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    error_response: ErrorResponder | None


class ApiRegistry:
    """API key -> :class:`ApiSpec`; modules fill it at import time."""

    def __init__(self) -> None:
        self._specs: dict[int, ApiSpec] = {}

    def api(
        self,
        key: int,
        name: str,
        min_version: int,
        max_version: int,
        error_response: ErrorResponder | None = None,
    ) -> Callable[[Handler], Handler]:
        """Decorator: serve ``key`` for ``min_version..max_version`` with the decorated handler."""

        def register(handler: Handler) -> Handler:
            if key in self._specs:
                raise ValueError(f"api key {key} registered twice")
            self._specs[key] = ApiSpec(key, name, min_version, max_version, handler, error_response)
            return handler

        return register

    def get(self, key: int) -> ApiSpec | None:
        return self._specs.get(key)

    def specs(self) -> list[ApiSpec]:
        return sorted(self._specs.values(), key=lambda s: s.key)


REGISTRY = ApiRegistry()
"""The process-wide registry the API modules register into."""
