"""What a handler knows about the request it serves besides the request body."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kcoord.protocol.codec import RequestHeader
from kcoord.security.principal import ANONYMOUS, KafkaPrincipal
from kcoord.security.sasl import SaslSession


@dataclass(slots=True)
class ConnectionInfo:
    """One client connection: its id, peer address, who it proved to be, and the callbacks to run when
    it closes. ``principal`` is ANONYMOUS until authentication (TLS client certificate or SASL) sets it;
    ``listener_name`` and ``security_protocol`` are those of the listener that accepted it."""

    connection_id: int
    client_host: str
    client_port: int
    principal: KafkaPrincipal = ANONYMOUS
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    close_callbacks: list[Callable[[], None]] = field(default_factory=list)
    sasl: SaslSession | None = None
    """The SASL exchange of a connection on a SASL listener; None elsewhere."""
    watched_members: set[tuple[str, str]] = field(default_factory=set)

    def on_close(self, callback: Callable[[], None]) -> None:
        self.close_callbacks.append(callback)


@dataclass(slots=True)
class RequestContext:
    """The request's header and connection; a handler's other dependencies are bound at registration."""

    header: RequestHeader
    connection: ConnectionInfo

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def client_host(self) -> str:
        return self.connection.client_host

    @property
    def principal(self) -> KafkaPrincipal:
        return self.connection.principal
