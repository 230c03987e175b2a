"""A loopback TCP proxy for tests that cut a client's connections while both processes live.

The proxy listens before the server starts (so the server can advertise the proxy's address
and every connection a client opens, bootstrap, broker and coordinator alike, runs through it)
and learns the upstream port afterwards. Each accepted connection gets its own upstream
connection and two pumping threads. The client-to-server pump also follows the Kafka request
framing (size, API key, version, correlation id, client id) to note which APIs a connection
carried and for which client id, so a test can pick out the coordinator connection
(JoinGroup/SyncGroup/Heartbeat) or every connection of one client, and can keep one client
from reconnecting (a network partition of that client alone).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field

JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 11, 12, 14
COORDINATOR_APIS = frozenset({JOIN_GROUP, HEARTBEAT, SYNC_GROUP})
# size (4) + api key (2) + api version (2) + correlation id (4) + client id length (2)
_FIXED_HEADER = 14


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    client_id: str | None


class RequestFraming:
    """Follows a request stream's frame boundaries and reports each request's header."""

    def __init__(self) -> None:
        self._header = bytearray()
        self._skip = 0

    def feed(self, data: bytes) -> list[RequestHeader]:
        headers: list[RequestHeader] = []
        view = memoryview(data)
        while view:
            if self._skip:
                taken = min(self._skip, len(view))
                self._skip -= taken
                view = view[taken:]
                continue
            needed = self._header_size() - len(self._header)
            self._header += view[:needed]
            view = view[needed:]
            if len(self._header) == self._header_size():
                headers.append(self._complete_header())
        return headers

    def _client_id_size(self) -> int:
        return max(int.from_bytes(self._header[12:14], "big", signed=True), 0)

    def _header_size(self) -> int:
        if len(self._header) < _FIXED_HEADER:
            return _FIXED_HEADER
        return _FIXED_HEADER + self._client_id_size()

    def _complete_header(self) -> RequestHeader:
        size = int.from_bytes(self._header[:4], "big", signed=True)
        length = int.from_bytes(self._header[12:14], "big", signed=True)
        client_id = None if length < 0 else bytes(self._header[14:]).decode("utf-8", "replace")
        header = RequestHeader(int.from_bytes(self._header[4:6], "big", signed=True), client_id)
        self._skip = max(size + 4 - len(self._header), 0)
        self._header.clear()
        return header


@dataclass
class ProxiedConnection:
    """One client connection and the upstream connection it was paired with."""

    number: int
    client: socket.socket
    upstream: socket.socket
    api_keys: set[int] = field(default_factory=set)
    client_id: str | None = None
    closed: threading.Event = field(default_factory=threading.Event)

    @property
    def is_coordinator(self) -> bool:
        """Did this connection carry group membership requests (JoinGroup, SyncGroup, Heartbeat)?"""
        return bool(self.api_keys & COORDINATOR_APIS)

    def cut(self) -> None:
        """Close both sides at once, as a network failure between client and server would look."""
        self.closed.set()
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class TcpProxy:
    """Forwards every connection accepted on 127.0.0.1:``port`` to 127.0.0.1:``upstream_port``."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.upstream_port: int | None = None
        self.connections: list[ProxiedConnection] = []
        # client id -> whether only its group-membership connections are blocked
        self.blocked: dict[str, bool] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, name="tcp-proxy-accept", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, upstream_port: int) -> TcpProxy:
        self.upstream_port = upstream_port
        self._acceptor.start()
        return self

    def open_connections(self, client_id: str | None = None) -> list[ProxiedConnection]:
        """The connections still open (only ``client_id``'s when given)."""
        with self._lock:
            connections = list(self.connections)
        return [
            c
            for c in connections
            if not c.closed.is_set() and (client_id is None or c.client_id == client_id)
        ]

    def cut(self, *, coordinator_only: bool = False, client_id: str | None = None) -> list[ProxiedConnection]:
        """Cut the open connections (only group-membership ones, only one client's); returns them."""
        victims = [c for c in self.open_connections(client_id) if c.is_coordinator or not coordinator_only]
        for connection in victims:
            connection.cut()
        return victims

    def partition(self, client_id: str, *, coordinator_only: bool = False) -> list[ProxiedConnection]:
        """Cut ``client_id``'s connections (or only its group-membership ones) and keep cutting
        new ones at their first such request, until healed."""
        self.blocked[client_id] = coordinator_only
        return self.cut(client_id=client_id, coordinator_only=coordinator_only)

    def heal(self, client_id: str) -> None:
        self.blocked.pop(client_id, None)

    def _is_blocked(self, connection: ProxiedConnection) -> bool:
        if connection.client_id is None or connection.client_id not in self.blocked:
            return False
        return connection.is_coordinator or not self.blocked[connection.client_id]

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        assert self.upstream_port is not None
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                connection = ProxiedConnection(len(self.connections), client, upstream)
                self.connections.append(connection)
            for source, target, framing in (
                (client, upstream, RequestFraming()),
                (upstream, client, None),
            ):
                threading.Thread(
                    target=self._pump,
                    args=(connection, source, target, framing),
                    name=f"tcp-proxy-{connection.number}",
                    daemon=True,
                ).start()

    def _pump(
        self,
        connection: ProxiedConnection,
        source: socket.socket,
        target: socket.socket,
        framing: RequestFraming | None,
    ) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if framing is not None:
                    for header in framing.feed(data):
                        connection.api_keys.add(header.api_key)
                        connection.client_id = connection.client_id or header.client_id
                    if self._is_blocked(connection):
                        break
                target.sendall(data)
        except OSError:
            pass
        if not connection.closed.is_set():
            connection.cut()
