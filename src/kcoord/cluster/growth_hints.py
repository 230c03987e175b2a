"""Tell consumers at once that a topic grew, so a group leader assigns with fresh metadata.

In the classic protocol the group leader assigns partitions from its own cached metadata, which a
client refreshes every ``metadata.max.age.ms`` (five minutes by default). When CreatePartitions
grows a topic, the coordinator starts a rebalance itself, but a leader whose metadata is stale
would hand out only the old partitions and rebalance a second time once it notices. So after a
topic grows, each connection's next Fetch of that topic is answered NOT_LEADER_OR_FOLLOWER (no
records) once: every client treats that as "refresh metadata now" and retries the fetch right
after, from the same offset. Nothing is lost; one fetch round trip is spent per consumer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcoord.timer.api import Clock

HINT_WINDOW_MS = 60_000
"""How long after a growth a connection that has not fetched the topic yet still gets the hint."""


@dataclass(slots=True)
class _Growth:
    grown_ms: int
    hinted_connections: set[int] = field(default_factory=set)


class GrowthHints:
    def __init__(self, clock: Clock, window_ms: int = HINT_WINDOW_MS) -> None:
        self._clock = clock
        self._window_ms = window_ms
        self._grown: dict[str, _Growth] = {}

    def topic_grew(self, topic: str) -> None:
        self._grown[topic] = _Growth(self._clock.now_ms())

    def take(self, topic: str, connection_id: int) -> bool:
        """True once per connection for a topic that grew within the window."""
        if not self._grown:
            return False
        growth = self._grown.get(topic)
        if growth is None:
            return False
        if self._clock.now_ms() - growth.grown_ms > self._window_ms:
            del self._grown[topic]
            return False
        if connection_id in growth.hinted_connections:
            return False
        growth.hinted_connections.add(connection_id)
        return True
