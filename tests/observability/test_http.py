"""The tiny observability HTTP server: routing, status codes, bound address, and bad requests."""

from __future__ import annotations

import asyncio

from kcoord.observability.http import HttpEndpoint, HttpResponse


def hello(path: str) -> HttpResponse | None:
    if path == "/hello":
        return HttpResponse(200, b"hi\n")
    if path == "/boom":
        raise RuntimeError("route bug")
    return None


async def exchange(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    reply = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    await writer.wait_closed()
    return reply


async def test_routes_answer_over_a_real_socket_on_a_port_chosen_by_the_os() -> None:
    """Port 0 binds a free port; a route's answer, 404, 405, 500 and 400 come back as HTTP/1.1."""
    endpoint = HttpEndpoint("127.0.0.1", 0, [hello])
    host, port = await endpoint.start()
    try:
        assert host == "127.0.0.1" and port > 0
        ok = await exchange(port, b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200 OK\r\n") and ok.endswith(b"\r\n\r\nhi\n")
        assert b"Content-Length: 3\r\n" in ok
        assert (await exchange(port, b"GET /nope HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert (await exchange(port, b"POST /hello HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert (await exchange(port, b"GET /boom HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 500")
        assert (await exchange(port, b"nonsense\r\n\r\n")).startswith(b"HTTP/1.1 400")
        head = await exchange(port, b"HEAD /hello HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n")
    finally:
        await endpoint.stop()
