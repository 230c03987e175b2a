"""The rebalance history outlives the server: kept across a crash (SIGKILL) and a clean restart."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.support.confluent_group import group_view, make_consumer, poll_until, stable_with
from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

GROUP = "history-keepers"
TOPIC = "history-topic"


def test_history_survives_restarts(kcoord: KcoordProcess) -> None:
    """Rebalances of a real confluent-kafka group are still listed, unchanged, after kill and after stop."""
    create_topic(kcoord.bootstrap, TOPIC, partitions=2)
    producer = Producer({"bootstrap.servers": kcoord.bootstrap})
    for i in range(10):
        producer.produce(TOPIC, value=b"m%d" % i, partition=i % 2)
    assert producer.flush(20) == 0
    first = make_consumer(kcoord.bootstrap, GROUP, TOPIC, "keeper-1")
    second = make_consumer(kcoord.bootstrap, GROUP, TOPIC, "keeper-2")
    try:
        poll_until([first, second], lambda: stable_with(kcoord, GROUP, 2, 2), "two members to settle")
    finally:
        second.close()
        first.close()
    before = group_view(kcoord, GROUP)["history"]
    assert len(before) >= 3 and all(entry["outcome"] != "in_progress" for entry in before)

    kcoord.restart()
    after_crash = group_view(kcoord, GROUP)
    assert after_crash["history"] == before

    assert kcoord.terminate() == 0
    kcoord.start()
    assert group_view(kcoord, GROUP)["history"] == before
