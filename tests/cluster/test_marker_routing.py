"""Where a node writes a transaction marker for a partition it holds: a data partition's to the
data writer, a ``__consumer_offsets`` partition's to the group coordinator (its pending offsets),
with the group coordinator's "not here (yet)" answers answered as Kafka's broker answers a partition
it does not lead."""

from __future__ import annotations

from kcoord.cluster.marker_routing import LocalMarkerWriter, RoutingMarkerWriter
from kcoord.coordinator.transactions import TopicPartition, TxnMarker
from kcoord.protocol.errors import ErrorCode

OFFSETS = "__consumer_offsets"


def marker(topic: str, partition: int, committed: bool = True) -> TxnMarker:
    """Producer 7 at epoch 1's marker on ``topic``-``partition``."""
    return TxnMarker(TopicPartition(topic, partition), 7, 1, committed, "tx")


class RecordingDataWriter:
    def __init__(self) -> None:
        self.written: list[tuple[TxnMarker, int]] = []

    async def write_marker(self, marker: TxnMarker, coordinator_epoch: int) -> ErrorCode:
        self.written.append((marker, coordinator_epoch))
        return ErrorCode.none


class GroupLog:
    """The group coordinator's end-marker side, answering ``answer``."""

    def __init__(self, answer: ErrorCode = ErrorCode.none) -> None:
        self.answer = answer
        self.written: list[tuple[int, int, int, bool, int]] = []

    async def write_end_marker(
        self, partition: int, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int
    ) -> ErrorCode:
        self.written.append((partition, producer_id, producer_epoch, committed, coordinator_epoch))
        return self.answer


async def test_a_data_partition_marker_goes_to_the_data_writer_and_an_offsets_one_to_the_group() -> None:
    """A marker for a data partition is the data writer's; one for ``__consumer_offsets`` is the
    group coordinator's, with the producer, decision and coordinator epoch unchanged."""
    data, group = RecordingDataWriter(), GroupLog()
    writer = LocalMarkerWriter(data, group, OFFSETS)
    assert await writer.write_marker(marker("out", 2), 4) == ErrorCode.none
    assert await writer.write_marker(marker(OFFSETS, 5, committed=False), 4) == ErrorCode.none
    assert data.written == [(marker("out", 2), 4)]
    assert group.written == [(5, 7, 1, False, 4)]


async def test_an_offsets_partition_this_node_does_not_hold_answers_not_leader() -> None:
    """The group coordinator's NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and
    COORDINATOR_NOT_AVAILABLE become NOT_LEADER_OR_FOLLOWER (the sender retries, at the new owner
    if it moved); its other answers pass through."""
    for not_here in (
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
    ):
        writer = LocalMarkerWriter(RecordingDataWriter(), GroupLog(not_here), OFFSETS)
        assert await writer.write_marker(marker(OFFSETS, 0), 0) == ErrorCode.not_leader_or_follower
    fenced = LocalMarkerWriter(RecordingDataWriter(), GroupLog(ErrorCode.invalid_producer_epoch), OFFSETS)
    assert await fenced.write_marker(marker(OFFSETS, 0), 0) == ErrorCode.invalid_producer_epoch


async def test_the_router_writes_a_partition_without_another_owner_locally() -> None:
    """With no other live owner, the routing writer hands offsets markers to the local writer too
    (a single node, or a partition this node holds)."""
    group = GroupLog()
    router = RoutingMarkerWriter(LocalMarkerWriter(RecordingDataWriter(), group, OFFSETS), lambda t, p: None)
    assert await router.write_marker(marker(OFFSETS, 3), 2) == ErrorCode.none
    assert group.written == [(3, 7, 1, True, 2)]
    router.close()
