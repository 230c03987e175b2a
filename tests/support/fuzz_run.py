"""Drive a running kcoord with fuzzed requests while a bystander connection keeps asking it something.

Used by the fuzz tests (hypothesis picks each frame) and the fuzz bench (a seeded loop for minutes).
Every loop is bounded in count and time, and everything stays on loopback.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kcoord.protocol.codec import request_class
from tests.support.hostile_frames import request_frame

API_VERSIONS = 18
_SIZE = struct.Struct(">i")


def rss_bytes(pid: int) -> int:
    """The resident set size of process ``pid`` (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


@dataclass
class FuzzStats:
    """What the server did with the fuzzed requests."""

    sent: int = 0
    per_api: Counter[str] = field(default_factory=Counter)
    answered: int = 0
    closed: int = 0
    silent: int = 0
    """Neither answered nor closed within the wait: parked JoinGroups, long polls, acks=0 produces."""

    def outcome(self, api: str, result: str) -> None:
        self.sent += 1
        self.per_api[api] += 1
        if result == "answered":
            self.answered += 1
        elif result == "closed":
            self.closed += 1
        else:
            self.silent += 1


def send_one(host: str, port: int, frame: bytes, wait_s: float) -> str:
    """Send ``frame`` on a new connection: ``answered``, ``closed`` or ``silent`` after ``wait_s``."""
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(frame)
        sock.settimeout(wait_s)
        try:
            data = sock.recv(4)
        except TimeoutError:
            return "silent"
        except ConnectionResetError:
            return "closed"
        return "answered" if data else "closed"


class Bystander:
    """A well-behaved connection that sends ApiVersions every ``interval_s`` and keeps its worst latency."""

    def __init__(self, host: str, port: int, interval_s: float = 0.02, timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.interval_s = interval_s
        self.worst_s = 0.0
        self.rounds = 0
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bystander", daemon=True)

    def __enter__(self) -> Bystander:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)
        self.sock.close()

    def _run(self) -> None:
        correlation_id = 0
        try:
            while not self._stop.wait(self.interval_s):
                correlation_id += 1
                started = time.perf_counter()
                self.sock.sendall(request_frame(API_VERSIONS, 3, b"\x02b\x021\x00", correlation_id))
                (size,) = _SIZE.unpack(self._exact(4))
                answer = self._exact(size)
                if _SIZE.unpack_from(answer, 0)[0] != correlation_id:
                    raise AssertionError("bystander got another request's answer")
                self.worst_s = max(self.worst_s, time.perf_counter() - started)
                self.rounds += 1
        except BaseException as exc:
            self.failure = exc

    def _exact(self, n: int) -> bytes:
        chunks = b""
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("the server closed the bystander's connection")
            chunks += chunk
        return chunks


def api_name(api_key: int, version: int) -> str:
    cls = request_class(api_key, version)
    return cls.__name__.removesuffix("Request") if cls is not None else str(api_key)
