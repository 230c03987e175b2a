"""Metadata (key 3), versions 0-13.

- v0: topics (an empty list means all topics), brokers, partitions with leader/replicas/isr.
- v1: a null topic list means all (empty now means none); broker rack, controller_id, is_internal.
- v2: cluster_id.  v3: throttle_time.  v4: allow_auto_topic_creation (before v4: always allowed).
- v5: offline_replicas.  v7: leader_epoch (kcoord reports -1 everywhere, so clients never
  validate epochs).  v8: authorized-operations bitfields, when asked for.
- v9: flexible.  v10: topic ids.  v11: drops the cluster authorized operations.
- v12: a topic may be asked for by id alone (name null); needed for librdkafka's KIP-848 consumer.
- v13: a top-level error_code (KIP-1102 rebootstrap); always 0 here.

One node is every partition's leader, its only replica and its whole ISR, and the controller
(admin clients send to ``controller_id`` and stall on -1). In a cluster the brokers are the live
nodes and each partition's leader is its owner (LEADER_NOT_AVAILABLE while it has none).

Auto-creation: a requested topic that does not exist is created when both the request allows it
(v4+; always before) and ``auto.create.topics.enable`` is on. Unlike Apache Kafka, which answers
LEADER_NOT_AVAILABLE for a topic it has just created and makes the client ask again, kcoord
answers with the ready topic: its logs exist before the response is sent, so the retry would only
add a metadata round trip (and librdkafka's backoff) to every first produce.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from kcoord.cluster.identity import Node
from kcoord.cluster.topic_manager import TopicInfo, TopicManager
from kcoord.cluster.topic_names import topic_name_problem
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.server.context import RequestContext

__all__ = [
    "CLUSTER_OPERATIONS",
    "OPERATIONS_OMITTED",
    "TOPIC_OPERATIONS",
    "broker_entries",
    "broker_entry",
    "handle_metadata",
]

ZERO_UUID = uuid.UUID(int=0)

OPERATIONS_OMITTED = -2147483648
"""The authorized-operations value meaning "not requested"."""


def _bits(*operations: int) -> int:
    return sum(1 << op for op in operations)


# AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12, CREATE_TOKENS 13, DESCRIBE_TOKENS 14.
# kcoord has no authorizer, so a client may do everything a resource type supports.
TOPIC_OPERATIONS = _bits(3, 4, 5, 6, 7, 8, 10, 11)
CLUSTER_OPERATIONS = _bits(5, 7, 8, 9, 10, 11, 12, 13, 14)


def broker_entry(node: Node) -> dict[str, Any]:
    """This node as a Metadata/DescribeCluster broker entry (DescribeCluster renames node_id)."""
    host, port = node.advertised
    return {"node_id": node.node_id, "host": host, "port": port, "rack": None}


def broker_entries(node: Node) -> list[dict[str, Any]]:
    """Every live node of the cluster (this one always among them), or this node alone."""
    if node.directory is None:
        return [broker_entry(node)]
    entries = [
        {"node_id": node_id, "host": host, "port": port, "rack": None}
        for node_id, host, port in node.directory.brokers()
        if node_id != node.node_id
    ]
    return sorted([broker_entry(node), *entries], key=lambda entry: int(entry["node_id"]))


def _partition_entry(node: Node, topic: str, index: int) -> dict[str, Any]:
    """One partition, led by this node alone or in a cluster by its owner (none: LEADER_NOT_AVAILABLE)."""
    leader: int | None = node.node_id if node.directory is None else node.directory.leader(topic, index)
    return {
        "error_code": ErrorCode.none if leader is not None else ErrorCode.leader_not_available,
        "partition_index": index,
        "leader_id": -1 if leader is None else leader,
        "leader_epoch": -1,
        "replica_nodes": [] if leader is None else [leader],
        "isr_nodes": [] if leader is None else [leader],
        "offline_replicas": [],
    }


def _topic_entry(node: Node, info: TopicInfo, with_operations: bool) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": [_partition_entry(node, info.name, index) for index in range(info.partitions)],
        "topic_authorized_operations": TOPIC_OPERATIONS if with_operations else OPERATIONS_OMITTED,
    }


def _error_entry(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
    }


async def _requested_topic(
    ctx: RequestContext,
    topics: TopicManager,
    node: Node,
    name: str | None,
    topic_id: uuid.UUID | None,
    auto_create: bool,
    with_ops: bool,
) -> dict[str, Any]:
    if name is None:
        info = topics.get_by_id(topic_id) if topic_id is not None else None
        if info is None:
            unknown = ErrorCode.unknown_topic_id
            return _error_entry(None if ctx.api_version >= 12 else "", unknown, topic_id or ZERO_UUID)
        return _topic_entry(node, info, with_ops)
    if topic_name_problem(name) is not None:
        return _error_entry(name, ErrorCode.invalid_topic_exception)
    info = topics.get(name)
    if info is None and auto_create:
        try:
            info = await topics.ensure(name)
        except KafkaError as exc:
            return _error_entry(name, exc.code)
    if info is None:
        return _error_entry(name, ErrorCode.unknown_topic_or_partition)
    return _topic_entry(node, info, with_ops)


def metadata_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    """Every requested topic carries the error (the response has no top-level error before v13)."""
    requested = getattr(request, "topics", None) or ()
    return {
        "brokers": [],
        "topics": [_error_entry(getattr(t, "name", None) or "", code) for t in requested],
        "error_code": code,
    }


def api(topics: TopicManager, node: Node, *, auto_create: bool) -> ApiSpec:
    """``auto_create``: ``auto.create.topics.enable``."""
    handler = functools.partial(handle_metadata, topics=topics, node=node, auto_create_enabled=auto_create)
    return ApiSpec(ApiKey.METADATA, "Metadata", 0, 13, handler, metadata_error_response)


async def handle_metadata(
    ctx: RequestContext, request: Any, *, topics: TopicManager, node: Node, auto_create_enabled: bool
) -> dict[str, Any]:
    version = ctx.api_version
    with_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        entries = [_topic_entry(node, info, with_ops) for info in topics.topics()]
    else:
        auto_create = bool(getattr(request, "allow_auto_topic_creation", True))
        auto_create = auto_create and auto_create_enabled
        entries = []
        seen: set[tuple[str | None, uuid.UUID | None]] = set()
        for topic in requested:
            name: str | None = topic.name
            topic_id: uuid.UUID | None = getattr(topic, "topic_id", None)
            if name is not None or topic_id == ZERO_UUID:
                topic_id = None
            if (name, topic_id) in seen:
                continue
            seen.add((name, topic_id))
            entries.append(await _requested_topic(ctx, topics, node, name, topic_id, auto_create, with_ops))
    include_cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    return {
        "throttle_time": 0,
        "brokers": broker_entries(node),
        "cluster_id": node.cluster_id,
        "controller_id": node.node_id,
        "topics": entries,
        "cluster_authorized_operations": CLUSTER_OPERATIONS if include_cluster_ops else OPERATIONS_OMITTED,
        "error_code": ErrorCode.none,
    }
