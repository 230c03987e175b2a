"""The end of every client's round-trip test: what came back, and what the server stored."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tests.support.clients import PARTITIONS, Consumed, Message, verify_round_trip
from tests.support.raw_client import RawClient
from tests.support.raw_ops import stored_compressions
from tests.support.server import KcoordProcess


def assert_round_trip(
    server: KcoordProcess,
    topic: str,
    codec: str,
    sent: Sequence[Message],
    received: Iterable[Consumed],
    *,
    check_timestamps: bool = True,
) -> None:
    """Every message came back once, in order, intact, from every partition; the batches the
    server stored use the codec the producer was asked for (no silent fallback to none)."""
    counts = verify_round_trip(sent, received, check_timestamps=check_timestamps)
    assert len(counts) == PARTITIONS, counts
    with RawClient(server.host, server.port) as raw:
        assert stored_compressions(raw, topic, PARTITIONS) == {codec}
