"""The test TCP proxy itself: request framing, forwarding, cutting and partitioning one client."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from tests.support.tcp_proxy import HEARTBEAT, RequestFraming, RequestHeader, TcpProxy


def frame(api_key: int, client_id: str | None, body: bytes = b"") -> bytes:
    encoded = b"" if client_id is None else client_id.encode()
    length = -1 if client_id is None else len(encoded)
    header = struct.pack(">hhih", api_key, 0, 7, length) + encoded
    return struct.pack(">i", len(header) + len(body)) + header + body


class EchoServer:
    """Sends back whatever a connection sends; remembers every byte it received."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.received = bytearray()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                self.received += data
                conn.sendall(data)


@pytest.fixture
def echo_proxy() -> Iterator[tuple[TcpProxy, EchoServer]]:
    echo = EchoServer()
    proxy = TcpProxy().start(echo.port)
    try:
        yield proxy, echo
    finally:
        proxy.stop()
        echo.listener.close()


def receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_framing_reads_headers_split_anywhere() -> None:
    """Request headers are found whether frames arrive byte by byte or several in one chunk."""
    stream = frame(HEARTBEAT, "member-1", b"x" * 300) + frame(3, None) + frame(11, "m", b"yz")
    framing = RequestFraming()
    byte_by_byte = [h for i in range(len(stream)) for h in framing.feed(stream[i : i + 1])]
    expected = [RequestHeader(HEARTBEAT, "member-1"), RequestHeader(3, None), RequestHeader(11, "m")]
    assert byte_by_byte == expected
    assert RequestFraming().feed(stream) == expected


def test_proxy_forwards_and_cut_closes_the_client_side(echo_proxy: tuple[TcpProxy, EchoServer]) -> None:
    """Bytes go both ways through the proxy; a cut closes the client's socket and marks the connection."""
    proxy, _ = echo_proxy
    request = frame(HEARTBEAT, "member-1", b"payload")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
        client.sendall(request)
        assert receive(client, len(request)) == request
        (connection,) = proxy.open_connections()
        assert connection.is_coordinator and connection.client_id == "member-1"
        assert proxy.cut(coordinator_only=True) == [connection]
        assert receive(client, 1) == b""
    assert proxy.open_connections() == []


def test_partitioned_client_cannot_reconnect_until_healed(echo_proxy: tuple[TcpProxy, EchoServer]) -> None:
    """A partitioned client id's new connections close at the first request, which never reaches upstream."""
    proxy, echo = echo_proxy
    proxy.partition("member-1")
    blocked = frame(HEARTBEAT, "member-1", b"blocked")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
        client.sendall(blocked)
        assert receive(client, 1) == b""
    assert b"blocked" not in echo.received
    proxy.heal("member-1")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
        client.sendall(blocked)
        assert receive(client, len(blocked)) == blocked


def test_coordinator_only_partition_lets_other_requests_through(
    echo_proxy: tuple[TcpProxy, EchoServer],
) -> None:
    """A coordinator-only partition passes a client's metadata traffic and cuts its first Heartbeat."""
    proxy, echo = echo_proxy
    proxy.partition("member-1", coordinator_only=True)
    metadata, heartbeat = frame(3, "member-1", b"metadata"), frame(HEARTBEAT, "member-1", b"beat")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
        client.sendall(metadata)
        assert receive(client, len(metadata)) == metadata
        client.sendall(heartbeat)
        assert receive(client, 1) == b""
    assert b"beat" not in echo.received
