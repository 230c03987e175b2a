"""confluent-kafka (librdkafka 2.16) round trips: admin-made topic, keyed produce with headers, assign."""

from __future__ import annotations

import pytest

from tests.support.clients import CODECS, make_messages
from tests.support.confluent_ops import consume_all, create_topic, produce_all
from tests.support.round_trip import assert_round_trip
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(shared_kcoord: KcoordProcess, topic_name: str, codec: str) -> None:
    """10,000 keyed messages with headers produced by librdkafka come back exactly once, in order, intact."""
    bootstrap = shared_kcoord.bootstrap
    create_topic(bootstrap, topic_name)
    messages = make_messages("confluent-kafka")
    produce_all(bootstrap, topic_name, messages, codec)
    received = consume_all(bootstrap, topic_name, len(messages))
    assert_round_trip(shared_kcoord, topic_name, codec, messages, received)
