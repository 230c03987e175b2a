"""Watch a kcoord subprocess while a test misbehaves: new log lines, and a well-behaved bystander client."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.support.batches import build_batch, read_batches
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic, fetch, produce
from tests.support.server import KcoordProcess


class LogWatch:
    """The log lines a server writes from now on."""

    def __init__(self, server: KcoordProcess) -> None:
        self.server = server
        self.start = len(server.logs)

    def new_lines(self) -> list[dict[str, Any]]:
        return self.server.logs[self.start :]

    def wait_for_mention(self, *words: str, timeout: float = 5.0) -> dict[str, Any]:
        """The first new log line whose JSON text holds every one of ``words`` (case-insensitive)."""
        wanted = [w.lower() for w in words]
        deadline = time.monotonic() + timeout
        while True:
            for line in self.new_lines():
                text = json.dumps(line).lower()
                if all(w in text for w in wanted):
                    return line
            if time.monotonic() >= deadline:
                shown = "\n".join(json.dumps(line) for line in self.new_lines()[-20:])
                raise AssertionError(
                    f"no new log line mentions {words} within {timeout}s; new lines:\n{shown}"
                )
            time.sleep(0.02)


class Bystander:
    """A second client, connected before the offence, that must keep producing and fetching."""

    def __init__(self, server: KcoordProcess, topic: str) -> None:
        self.server = server
        self.topic = topic
        self.client = RawClient(server.host, server.port, client_id="bystander")
        assert create_topic(self.client, topic) == 0
        self.rounds = 0

    def round_trip(self) -> None:
        """Produce one record on the open connection and fetch it back: no error, same bytes."""
        self.rounds += 1
        value = f"bystander-{self.rounds}".encode()
        error, base_offset = produce(
            self.client, self.topic, 0, build_batch([(b"k", value)], timestamp_ms=_now())
        )
        assert error == 0, f"bystander produce failed with error {error}"
        fetched = fetch(self.client, self.topic, 0, base_offset)
        assert fetched.error_code == 0, f"bystander fetch failed with error {fetched.error_code}"
        records = [r for b in read_batches(fetched.records) for r in b.records if r.offset == base_offset]
        assert [r.value for r in records] == [value]

    def close(self) -> None:
        self.client.close()


def _now() -> int:
    return int(time.time() * 1000)
