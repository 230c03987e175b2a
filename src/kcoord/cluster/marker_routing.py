"""Transaction markers for partitions another node of the cluster leads: WriteTxnMarkers to that node.

The transaction coordinator of a transactional id is the owner of the id's ``__transaction_state``
partition; the transaction's partitions may be led by other nodes: its data partitions, and the
``__consumer_offsets`` partition of the group whose offsets it committed (TxnOffsetCommit). Kafka's
coordinator sends them WriteTxnMarkers (API 27); so does :class:`RoutingMarkerWriter`: a partition
this node holds is written by the :class:`LocalMarkerWriter`, one another live node owns gets a
WriteTxnMarkers v1 request on a connection kept per node (one request at a time per connection),
and the partition's answer is the marker's. The receiving node's WriteTxnMarkers handler writes
with its own :class:`LocalMarkerWriter`.

:class:`LocalMarkerWriter` sends a marker for a data partition to the
:class:`~kcoord.cluster.transaction_markers.DataMarkerWriter` and one for an offsets partition to
the group coordinator (``write_end_marker``: through the partition's runner, so its pending
transactional offsets become committed or are dropped), as Kafka's broker appends the marker and
then tells its group coordinator (``onTransactionCompleted``). The group coordinator's
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and COORDINATOR_NOT_AVAILABLE are answered
NOT_LEADER_OR_FOLLOWER, what Kafka's broker answers for a partition it does not lead. A connection
that fails is dropped and the marker answers NOT_LEADER_OR_FOLLOWER, which the dispatcher retries (after the
membership has perhaps moved the partition). Only plaintext listeners are reached this way: kcoord
has no inter-node credentials, so a cluster whose nodes accept only TLS or SASL cannot route
markers (the marker is retried and the transaction stays PrepareCommit/PrepareAbort).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import structlog

from kcoord.cluster.node_connection import CALL_FAILURES, NodeConnection
from kcoord.coordinator.transactions import MarkerWriter, TxnMarker
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode

__all__ = ["EndMarkerLog", "LocalMarkerWriter", "RoutingMarkerWriter"]

log = structlog.get_logger(__name__)

_NOT_HERE = frozenset(
    {ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available}
)
"""The group coordinator's answers for an offsets partition it does not serve (yet): a marker's
sender is answered NOT_LEADER_OR_FOLLOWER for them, as Kafka's broker translates them."""

WRITE_TXN_MARKERS_V = 1

OwnerOf = Callable[[str, int], "tuple[str, int] | None"]
"""``(topic, partition) -> (host, port)`` of the live node that leads it, None for this node or none."""


class EndMarkerLog(Protocol):
    """Contract B: the group coordinator's ``write_end_marker`` for its offsets partitions."""

    async def write_end_marker(
        self, partition: int, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int
    ) -> ErrorCode: ...


class LocalMarkerWriter:
    """This node's partitions: data partitions to the data writer, offsets partitions to the group
    coordinator (see the module docstring)."""

    def __init__(self, data: MarkerWriter, offsets: EndMarkerLog, offsets_topic: str) -> None:
        self._data = data
        self._offsets = offsets
        self._offsets_topic = offsets_topic

    async def write_marker(self, marker: TxnMarker, coordinator_epoch: int) -> ErrorCode:
        if marker.partition.topic != self._offsets_topic:
            return await self._data.write_marker(marker, coordinator_epoch)
        error = await self._offsets.write_end_marker(
            marker.partition.partition,
            marker.producer_id,
            marker.producer_epoch,
            marker.committed,
            coordinator_epoch,
        )
        return ErrorCode.not_leader_or_follower if error in _NOT_HERE else error


class RoutingMarkerWriter:
    """Contract A for the whole cluster: local partitions locally, the others by WriteTxnMarkers."""

    def __init__(self, local: MarkerWriter, owner_of: OwnerOf) -> None:
        self._local = local
        self._owner_of = owner_of
        self._connections: dict[tuple[str, int], NodeConnection] = {}

    async def write_marker(self, marker: TxnMarker, coordinator_epoch: int) -> ErrorCode:
        topic, partition = marker.partition.topic, marker.partition.partition
        owner = self._owner_of(topic, partition)
        if owner is None:
            return await self._local.write_marker(marker, coordinator_epoch)
        connection = self._connections.get(owner)
        if connection is None:
            connection = self._connections[owner] = NodeConnection(
                *owner, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_V, "kcoord-transaction-coordinator"
            )
        body = {
            "markers": [
                {
                    "producer_id": marker.producer_id,
                    "producer_epoch": marker.producer_epoch,
                    "transaction_result": marker.committed,
                    "topics": [{"name": topic, "partition_indexes": [partition]}],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        }
        try:
            response = await connection.call(body)
        except CALL_FAILURES as exc:
            log.warning("transaction_marker.remote_failed", node=f"{owner[0]}:{owner[1]}", error=repr(exc))
            connection.close()
            self._connections.pop(owner, None)
            return ErrorCode.not_leader_or_follower
        for answer in response.markers:
            for topic_result in answer.topics:
                for result in topic_result.partitions:
                    return ErrorCode(int(result.error_code))
        return ErrorCode.unknown_server_error

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
