"""DescribeCluster (key 60), versions 0-2.

- v0: brokers, controller id, cluster id, and the cluster authorized operations when asked for.
- v1: ``endpoint_type`` (KIP-919): 1 asks for brokers, 2 for controllers. kcoord listens as a
  broker, so a controller request gets MISMATCHED_ENDPOINT_TYPE as from a Kafka broker.
- v2: ``include_fenced_brokers`` and a per-broker ``is_fenced``; this node is never fenced.

confluent-kafka's ``AdminClient.describe_cluster`` uses it; the answer matches Metadata's (in a
cluster: every live node).

Authorization, as Kafka 4's ``computeDescribeClusterResponse``: none is needed, every principal
gets the brokers and the cluster id. Asked for, the cluster authorized operations are the
principal's bit set when it may DESCRIBE the cluster, else 0; not asked for, Kafka's "omitted".
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import cluster_operations
from kcoord.apis.broker.metadata import broker_entries
from kcoord.apis.wiring import NodeApi
from kcoord.cluster.identity import Node
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["handle_describe_cluster"]

_BROKERS_ENDPOINT = 1


def describe_cluster_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "cluster_id": "", "brokers": []}


async def handle_describe_cluster(
    ctx: RequestContext, request: Any, *, node: Node, authorizer: Authorizer
) -> dict[str, Any]:
    if getattr(request, "endpoint_type", _BROKERS_ENDPOINT) != _BROKERS_ENDPOINT:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.mismatched_endpoint_type,
            "error_message": "The request was sent to a broker endpoint, but asked for controllers.",
            "endpoint_type": request.endpoint_type,
            "cluster_id": node.cluster_id,
            "brokers": [],
        }
    with_ops = bool(request.include_cluster_authorized_operations)
    operations = cluster_operations(ctx, authorizer, asked=with_ops)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": _BROKERS_ENDPOINT,
        "cluster_id": node.cluster_id,
        "controller_id": node.node_id,
        "brokers": [
            {
                "broker_id": broker["node_id"],
                "host": broker["host"],
                "port": broker["port"],
                "rack": None,
                "is_fenced": False,
            }
            for broker in broker_entries(node, ctx.connection.listener_name)
        ],
        "cluster_authorized_operations": operations,
    }


api = NodeApi(
    ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", 0, 2, handle_describe_cluster, describe_cluster_error_response
)
