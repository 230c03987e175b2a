"""WriteTxnMarkers (key 27), versions 1-2: a transaction coordinator's markers for this node's partitions.

- v0: not served (kio has no schema for it; Kafka 2.4+ coordinators send v1).
- v1: flexible.
- v2: ``transaction_version`` per marker (KIP-890 part 2, the marker's transaction version);
  accepted and not needed: kcoord does not advertise ``transaction.version`` 2.

Sent by the node that coordinates a transactional id to the node holding a data partition of the
transaction (in a cluster), never by clients. Each marker is written to each of its partitions
(a :class:`~kcoord.coordinator.transactions.TxnMarker` with no transactional id: the request carries
none) by :class:`kcoord.cluster.marker_routing.LocalMarkerWriter`: a data partition's by the
``DataMarkerWriter`` (durable before the answer), a ``__consumer_offsets`` partition's by the group
coordinator (its pending transactional offsets committed or dropped), each answering per partition
as its docstring says. Markers of one request are written one after another,
in request order, as Kafka's ``handleWriteTxnMarkersRequest`` appends them.

Offsets markers are appended through the partition's runner and applied to its shard, as Kafka's
handler hands them to its group coordinator; its NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and
COORDINATOR_NOT_AVAILABLE are answered NOT_LEADER_OR_FOLLOWER, as Kafka translates them.

Also sent by admin clients (``kafka-transactions.sh abort``, ``kcoord transactions abort``) to end a
hanging transaction on one partition.

Authorization: Cluster CLUSTER_ACTION, as Kafka: without it every partition is answered
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op, may_cluster
from kcoord.apis.wiring import own_api
from kcoord.coordinator.transactions import MarkerWriter, TopicPartition, TxnMarker
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["api", "handle_write_txn_markers"]


def write_txn_markers_error(request: Any, code: ErrorCode) -> dict[str, Any]:
    """Every partition of every marker answered with ``code``."""
    return {
        "markers": [
            {
                "producer_id": marker.producer_id,
                "topics": [
                    {
                        "name": topic.name,
                        "partitions": [
                            {"partition_index": int(index), "error_code": code}
                            for index in topic.partition_indexes
                        ],
                    }
                    for topic in marker.topics
                ],
            }
            for marker in request.markers
        ]
    }


async def handle_write_txn_markers(
    ctx: RequestContext, request: Any, *, writer: MarkerWriter, authorizer: Authorizer
) -> dict[str, Any]:
    if not may_cluster(ctx, authorizer, Op.CLUSTER_ACTION):
        return write_txn_markers_error(request, ErrorCode.cluster_authorization_failed)
    results = []
    for entry in request.markers:
        producer_id, producer_epoch = int(entry.producer_id), int(entry.producer_epoch)
        committed, coordinator_epoch = bool(entry.transaction_result), int(entry.coordinator_epoch)
        topics = []
        for topic in entry.topics:
            partitions = []
            for index in topic.partition_indexes:
                marker = TxnMarker(
                    TopicPartition(topic.name, int(index)), producer_id, producer_epoch, committed, ""
                )
                code = await writer.write_marker(marker, coordinator_epoch)
                partitions.append({"partition_index": int(index), "error_code": code})
            topics.append({"name": topic.name, "partitions": partitions})
        results.append({"producer_id": producer_id, "topics": topics})
    return {"markers": results}


api = own_api(
    ApiKey.WRITE_TXN_MARKERS, "WriteTxnMarkers", 1, 2, handle_write_txn_markers, write_txn_markers_error
)
