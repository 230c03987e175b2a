"""Connection limits: ``max.connections``, ``max.connections.per.ip`` and its overrides.

As in Apache Kafka, a connection from an address that already holds its share
(``max.connections.per.ip``, or the address's entry in ``max.connections.per.ip.overrides``) is
closed as soon as it is accepted. Kafka's acceptor stops accepting while the listener holds
``max.connections``; kcoord closes the surplus connection instead, so a flood cannot park
descriptors in the process while it waits. Each refusal is counted; it is logged once per offending
address until that address's connections drop back under its limit.
"""

from __future__ import annotations

import contextlib
import socket
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field

import structlog

from kcoord.server.memory_pool import MemoryPool

log = structlog.get_logger(__name__)

LimitObserver = Callable[[str], None]
"""``observe(limit_name)`` each time a limit refuses or holds back something."""


def _ignore(_limit: str) -> None:
    return None


_MAX_REMEMBERED_OFFENDERS = 10_000
"""Past this many offenders logged and not yet forgiven, an offender log starts over (bounded memory)."""


class OffenderLog:
    """Logs a limit's refusal once per offender until :meth:`forgive` is called for it (limits that
    close the connection never forgive: their offenders are logged once per address)."""

    def __init__(self, limit: str, observe: LimitObserver) -> None:
        self._limit = limit
        self._observe = observe
        self._logged: set[str] = set()

    def refused(self, offender: str, **details: object) -> None:
        self._observe(self._limit)
        if offender not in self._logged:
            if len(self._logged) >= _MAX_REMEMBERED_OFFENDERS:
                self._logged.clear()
            self._logged.add(offender)
            log.warning("limit.exceeded", limit=self._limit, offender=offender, **details)

    def forgive(self, offender: str) -> None:
        self._logged.discard(offender)

    def forgive_all(self) -> None:
        self._logged.clear()


class ConnectionLimits:
    """Counts open connections per address and decides whether a new one may stay."""

    def __init__(
        self,
        *,
        max_connections: int,
        max_per_ip: int,
        per_ip_overrides: Mapping[str, int] | None = None,
        observe: LimitObserver = _ignore,
    ) -> None:
        self._max_connections = max_connections
        self._max_per_ip = max_per_ip
        self._overrides = dict(per_ip_overrides or {})
        self._open: Counter[str] = Counter()
        self._total = 0
        self._per_ip_log = OffenderLog("max.connections.per.ip", observe)
        self._total_log = OffenderLog("max.connections", observe)

    @property
    def total(self) -> int:
        return self._total

    def reconfigure(
        self, *, max_connections: int, max_per_ip: int, per_ip_overrides: Mapping[str, int]
    ) -> None:
        """New limits (dynamic broker configs); open connections stay, new ones meet the new limits."""
        self._max_connections = max_connections
        self._max_per_ip = max_per_ip
        self._overrides = dict(per_ip_overrides)

    def limit_for(self, host: str) -> int:
        return self._overrides.get(host, self._max_per_ip)

    def admit(self, host: str) -> bool:
        """True and counted when ``host`` may open one more connection; False (logged) when not."""
        limit = self.limit_for(host)
        if self._open[host] >= limit:
            self._per_ip_log.refused(host, open=self._open[host], max=limit)
            return False
        if self._total >= self._max_connections:
            self._total_log.refused(host, open=self._total, max=self._max_connections)
            return False
        self._open[host] += 1
        self._total += 1
        return True

    def release(self, host: str) -> None:
        """A connection admitted for ``host`` closed."""
        self._total -= 1
        remaining = self._open[host] - 1
        if remaining <= 0:
            del self._open[host]
        else:
            self._open[host] = remaining
        if remaining < self.limit_for(host):
            self._per_ip_log.forgive(host)
        if self._total < self._max_connections:
            self._total_log.forgive_all()


def parse_overrides(raw: object) -> dict[str, int]:
    """Kafka's ``max.connections.per.ip.overrides``: ``host:count,host:count`` (IPv6 hosts in brackets
    or bare, the count after the last colon)."""
    if isinstance(raw, Mapping):
        return {str(k): int(v) for k, v in raw.items()}
    overrides: dict[str, int] = {}
    for item in str(raw or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"expected HOST:COUNT, got {item!r}")
        overrides[host.strip().strip("[]")] = int(count)
    return overrides


@dataclass(eq=False)
class ServerLimits:
    """The limits one listener enforces, shared by its connections.

    ``send_buffer_bytes`` / ``receive_buffer_bytes`` are Kafka's ``socket.send.buffer.bytes`` and
    ``socket.receive.buffer.bytes`` (-1: the OS default). The send buffer matters for fairness: a
    client that pipelines requests without reading stops being served once the kernel's send buffer
    and the transport's 64 KiB high-water mark are full, and loopback autotuning lets the kernel
    buffer grow to megabytes, i.e. thousands of answers computed for nobody while others wait.
    """

    connections: ConnectionLimits
    pool: MemoryPool | None
    _: KW_ONLY
    read_timeout_s: float
    observe: LimitObserver = _ignore
    send_buffer_bytes: int = -1
    receive_buffer_bytes: int = -1
    read_timeouts: OffenderLog = field(init=False)
    oversized_frames: OffenderLog = field(init=False)
    oversized_before_authentication: OffenderLog = field(init=False)
    memory_waits: OffenderLog = field(init=False)
    unread_answers: OffenderLog = field(init=False)

    def __post_init__(self) -> None:
        self.read_timeouts = OffenderLog("kcoord.request.read.timeout.ms", self.observe)
        self.oversized_frames = OffenderLog("socket.request.max.bytes", self.observe)
        self.oversized_before_authentication = OffenderLog("sasl.server.max.receive.size", self.observe)
        self.memory_waits = OffenderLog("queued.max.request.bytes", self.observe)
        self.unread_answers = OffenderLog("socket.send.buffer.bytes", self.observe)

    def size_buffers(self, sock: socket.socket) -> None:
        """Apply the socket buffer sizes to an accepted connection."""
        with contextlib.suppress(OSError):
            if self.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            if self.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)

    @classmethod
    def unlimited(cls, read_timeout_s: float = 60.0) -> ServerLimits:
        connections = ConnectionLimits(max_connections=2**31 - 1, max_per_ip=2**31 - 1)
        return cls(connections, None, read_timeout_s=read_timeout_s)
