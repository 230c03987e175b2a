"""Which APIs kcoord serves, at which versions, and by which handler.

Each API module offers a factory that binds its handler to the dependencies it needs and returns
an :class:`ApiSpec` with the versions it implements; the composition root (``kcoord.app``) adds
those specs to one :class:`ApiRegistry`. That registry is the only source of the ApiVersions
answer, so kcoord advertises what it serves (clients use whatever is advertised), with one
exception taken from Kafka 4: Produce v0-2 (the old message format) are advertised but not served,
and such a request closes the connection. Kafka 4 dropped those versions (KIP-896) and then
advertised them again (KAFKA-18659) because librdkafka before 2.11.1 (kcat, confluent-kafka)
silently stops compressing with gzip, snappy and lz4 unless Produce v0 is advertised;
``tests/clients/test_kcat.py`` fails without it. No client kcoord is tested with sends them:
clients pick the highest version both sides know, and kafka-python 2.0.2 with ``api_version``
auto, aiokafka, kafkajs and librdkafka all use v3 or later. Only a client pinned to a broker older
than 0.11 (kafka-python's ``api_version=(0, 10)``, say) sends v0-2 and sees its connection closed.
Nothing registers itself on import: what is served is what the root added.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.codec import RequestHeader

Handler = Callable[[Any, Any], Awaitable[Any]]
"""``async def handle(ctx, request) -> mapping | kio entity``: the response body."""

ErrorResponder = Callable[[Any, ErrorCode], Mapping[str, Any]]
"""Builds the whole response of an API from its request and one error code."""

Decoder = Callable[[bytes], tuple[RequestHeader, Any]]
"""A hot API's own reader of its frames; raises ``ValueError`` for a frame it leaves to kio."""


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    error_response: ErrorResponder | None = None
    decoder: Decoder | None = None
    pipelined: bool = False
    """Its handler suspends only for its own records' durability (once its outcome is decided and
    its records are queued in log order), and its outcome never depends on an earlier request of
    the same API being durable: a connection may start the next such request while one waits, so
    that pipelined ones share a write round (:mod:`kcoord.server.connection`)."""


class ApiRegistry:
    """API key -> :class:`ApiSpec`, filled by the composition root."""

    def __init__(self, specs: Iterable[ApiSpec] = ()) -> None:
        self._specs: dict[int, ApiSpec] = {}
        self.by_key: Mapping[int, ApiSpec] = self._specs
        """The specs by API key, kept as specs are added: the router looks every request up in it."""
        self.pipelined_keys: frozenset[int] = frozenset()
        """The keys of the :attr:`ApiSpec.pipelined` specs, kept as specs are added: every new
        connection reads it."""
        for spec in specs:
            self.add(spec)

    def add(self, spec: ApiSpec) -> None:
        """Serve ``spec.key`` for ``spec.min_version..spec.max_version`` with ``spec.handler``."""
        if spec.key in self._specs:
            raise ValueError(f"api key {spec.key} registered twice")
        self._specs[spec.key] = spec
        if spec.pipelined:
            self.pipelined_keys = self.pipelined_keys | {spec.key}

    def get(self, key: int) -> ApiSpec | None:
        return self._specs.get(key)

    def specs(self) -> list[ApiSpec]:
        return sorted(self._specs.values(), key=lambda s: s.key)
