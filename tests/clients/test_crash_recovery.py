"""SIGKILL right after librdkafka's acknowledged produces (acks=all, flush policy always), then restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clients import PARTITIONS, make_messages, verify_round_trip
from tests.support.confluent_ops import consume_all, create_topic, produce_all
from tests.support.raw_client import RawClient
from tests.support.raw_ops import list_offset
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients


def log_end_offsets(server: KcoordProcess, topic: str) -> list[int]:
    with RawClient(server.host, server.port) as client:
        answers = [list_offset(client, topic, p) for p in range(PARTITIONS)]
    assert all(error == 0 for error, _ in answers), answers
    return [offset for _, offset in answers]


def test_acknowledged_messages_survive_sigkill(kcoord_factory: type[KcoordProcess], tmp_path: Path) -> None:
    """Every message librdkafka saw acknowledged reads back after SIGKILL + restart; end offsets unchanged."""
    server = kcoord_factory(tmp_path / "data", {"log.flush.policy": "always"}).start()
    topic = "crash-recovery"
    create_topic(server.bootstrap, topic)
    messages = make_messages("crash-recovery")
    produce_all(server.bootstrap, topic, messages, "lz4")
    ends_before = log_end_offsets(server, topic)
    server.kill()
    server.start()
    assert log_end_offsets(server, topic) == ends_before
    counts = verify_round_trip(messages, consume_all(server.bootstrap, topic, len(messages)))
    assert [counts.get(p, 0) for p in range(PARTITIONS)] == ends_before
