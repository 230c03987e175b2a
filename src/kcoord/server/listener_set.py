"""Every listener of the node (``listeners``), each on its own port with its own security protocol.

Built from the settings: the listener's name gives its security protocol (directly or through
``listener.security.protocol.map``); SSL listeners share one TLS context and SASL_SSL listeners
another (no client certificate asked), SASL listeners put a SASL gate in front of the router.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from kcoord.config import Settings, SettingsError
from kcoord.config.listeners import ListenerAddress, security_protocol_of
from kcoord.security.sasl import SaslSettings
from kcoord.security.tls import TlsConfigError, server_context
from kcoord.server.limits import ServerLimits
from kcoord.server.listener import Listener
from kcoord.server.router import Router

_TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class ListenerSet:
    """The listeners in the order ``listeners`` names them; the first is the default one."""

    def __init__(self, listeners: list[Listener], limits: ServerLimits | None = None) -> None:
        self.listeners = listeners
        self.limits = limits or ServerLimits.unlimited()
        """The node's limits, shared by every listener (connection counts, request memory)."""
        self.bound: dict[str, tuple[str, int]] = {}

    @classmethod
    def build(
        cls,
        settings: Settings,
        router: Router,
        sasl_for: Callable[[str], SaslSettings],
        limits: ServerLimits | None = None,
    ) -> ListenerSet:
        """One Listener per entry of ``listeners``; raises SettingsError for what cannot be served.

        Every listener shares ``limits``: connection counts and the request memory pool are the node's.
        """
        addresses: tuple[ListenerAddress, ...] = settings["listeners"]
        shared = limits or ServerLimits.unlimited()
        protocol_map = settings["listener.security.protocol.map"]
        tls: dict[str, ssl.SSLContext] = {}
        listeners = []
        for address in addresses:
            try:
                protocol = security_protocol_of(address.name, protocol_map)
            except ValueError as exc:
                raise SettingsError(f"listeners: {exc}") from exc
            if protocol in _TLS_PROTOCOLS and protocol not in tls:
                try:
                    tls[protocol] = server_context(settings, with_client_auth=protocol not in _SASL_PROTOCOLS)
                except TlsConfigError as exc:
                    raise SettingsError(f"listener {address.name} ({protocol}): {exc}") from exc
            listeners.append(
                Listener(
                    router,
                    address.host,
                    address.port,
                    max_request_bytes=settings["socket.request.max.bytes"],
                    idle_timeout_s=settings["connections.max.idle.ms"] / 1000,
                    backlog=settings["socket.listen.backlog.size"],
                    name=address.name,
                    security_protocol=protocol,
                    ssl_context=tls.get(protocol),
                    sasl=sasl_for(address.name) if protocol in _SASL_PROTOCOLS else None,
                    limits=shared,
                )
            )
        return cls(listeners, shared)

    @property
    def open_connections(self) -> int:
        return sum(listener.open_connections for listener in self.listeners)

    async def bind(self) -> dict[str, tuple[str, int]]:
        """Bind every listener without accepting yet; returns name -> address actually bound."""
        for listener in self.listeners:
            self.bound[listener.name] = await listener.bind()
        return dict(self.bound)

    async def start(self) -> dict[str, tuple[str, int]]:
        """Bind (where not yet bound) and start accepting on every listener; name -> bound address."""
        for listener in self.listeners:
            self.bound[listener.name] = await listener.start()
        return dict(self.bound)

    def first_unbound(self) -> tuple[str, int] | None:
        """The configured address of the first listener that is not bound (its start failed), if any."""
        for listener in self.listeners:
            if listener.name not in self.bound:
                return listener.address
        return None

    async def stop_accepting(self) -> None:
        for listener in self.listeners:
            await listener.stop_accepting()

    def stop_reading(self) -> None:
        for listener in self.listeners:
            listener.stop_reading()

    async def drain(self, timeout_s: float) -> None:
        await asyncio.gather(*(listener.drain(timeout_s) for listener in self.listeners))


def advertised_addresses(settings: Settings, bound: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """Listener name -> address told to clients: ``advertised.listeners`` where given, else the bound one.

    A single advertised address without a listener name (``--advertised-listener HOST:PORT``) is
    the first listener's.
    """
    configured: tuple[ListenerAddress, ...] | None = settings["advertised.listeners"]
    explicit = {a.name: (a.host, a.port) for a in configured or ()}
    names = list(bound)
    if configured and len(configured) == 1 and configured[0].name not in bound:
        explicit = {names[0]: (configured[0].host, configured[0].port)}
    unknown = set(explicit) - set(bound)
    if unknown:
        raise SettingsError(f"advertised.listeners: no listener named {', '.join(sorted(unknown))}")
    result = {}
    for name, (host, port) in bound.items():
        result[name] = explicit.get(name) or ("127.0.0.1" if host in ("0.0.0.0", "::") else host, port)
    return result
