"""A consumer group of real confluent-kafka consumers driven from the test's thread, and the
server's JSON view of it (``/v1/groups/{group}``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer

from tests.observability.live_group import http_get_json
from tests.support.server import KcoordProcess

DEADLINE_S = 60.0


def make_consumer(bootstrap: str, group: str, topic: str, name: str, **config: Any) -> Consumer:
    """A subscribed consumer that commits by hand; short heartbeats so rebalances settle quickly.

    ``config`` adds librdkafka properties (underscores for dots: ``max_poll_interval_ms=6000``).
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500,
            **{key.replace("_", "."): value for key, value in config.items()},
        }
    )
    consumer.subscribe([topic])
    return consumer


def poll_until(consumers: list[Consumer], done: Callable[[], bool], what: str) -> None:
    """Poll every consumer in turn (that drives their rebalances), committing each message read,
    until ``done()`` holds."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        for consumer in consumers:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                consumer.commit(message=message, asynchronous=False)


def group_view(kcoord: KcoordProcess, group: str) -> dict[str, Any]:
    view: dict[str, Any] = http_get_json(str(kcoord.metrics_address), f"/v1/groups/{group}")
    return view


def stable_with(kcoord: KcoordProcess, group: str, members: int, rebalances: int) -> bool:
    """Whether the group is Stable with ``members`` members after at least ``rebalances`` rebalances."""
    try:
        view = group_view(kcoord, group)
    except OSError:
        return False
    return bool(
        view["state"] == "Stable" and len(view["members"]) == members and view["rebalances"] >= rebalances
    )
