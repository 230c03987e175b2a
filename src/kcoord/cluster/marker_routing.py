"""Transaction markers for partitions another node of the cluster leads: WriteTxnMarkers to that node.

The transaction coordinator of a transactional id is the owner of the id's ``__transaction_state``
partition; the transaction's data partitions may be led by other nodes. Kafka's coordinator sends
them WriteTxnMarkers (API 27); so does :class:`RoutingMarkerWriter`: a partition this node holds
is written by the local :class:`~kcoord.cluster.transaction_markers.DataMarkerWriter`, one another
live node owns gets a WriteTxnMarkers v1 request on a connection kept per node (one request at a
time per connection), and the partition's answer is the marker's. A connection that fails is
dropped and the marker answers NOT_LEADER_OR_FOLLOWER, which the dispatcher retries (after the
membership has perhaps moved the partition). Only plaintext listeners are reached this way: kcoord
has no inter-node credentials, so a cluster whose nodes accept only TLS or SASL cannot route
markers (the marker is retried and the transaction stays PrepareCommit/PrepareAbort).
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from kcoord.cluster.node_connection import CALL_FAILURES, NodeConnection
from kcoord.cluster.transaction_markers import DataMarkerWriter
from kcoord.coordinator.transactions import TxnMarker
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode

__all__ = ["RoutingMarkerWriter"]

log = structlog.get_logger(__name__)

WRITE_TXN_MARKERS_V = 1

OwnerOf = Callable[[str, int], "tuple[str, int] | None"]
"""``(topic, partition) -> (host, port)`` of the live node that leads it, None for this node or none."""


class RoutingMarkerWriter:
    """Contract A for the whole cluster: local partitions locally, the others by WriteTxnMarkers."""

    def __init__(self, local: DataMarkerWriter, owner_of: OwnerOf) -> None:
        self._local = local
        self._owner_of = owner_of
        self._connections: dict[tuple[str, int], NodeConnection] = {}

    async def write_marker(self, marker: TxnMarker, coordinator_epoch: int) -> ErrorCode:
        topic, partition = marker.partition.topic, marker.partition.partition
        producer_id, producer_epoch, committed = marker.producer_id, marker.producer_epoch, marker.committed
        owner = self._owner_of(topic, partition)
        if owner is None:
            return await self._local.write_marker(
                topic, partition, producer_id, producer_epoch, committed, coordinator_epoch
            )
        connection = self._connections.get(owner)
        if connection is None:
            connection = self._connections[owner] = NodeConnection(
                *owner, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_V, "kcoord-transaction-coordinator"
            )
        body = {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": committed,
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
