"""Metadata (key 3), versions 0-13.

- v0: topics (an empty list means all topics), brokers, partitions with leader/replicas/isr.
- v1: a null topic list means all (empty now means none); broker rack, controller_id, is_internal.
- v2: cluster_id.  v3: throttle_time.  v4: allow_auto_topic_creation (before v4: always allowed).
- v5: offline_replicas.  v7: leader_epoch: a node alone reports 0 (as a single Kafka broker does
  for a topic it created), a cluster each partition's owner epoch (see
  :mod:`kcoord.cluster.leader_epochs`).  v8: authorized-operations bitfields, when asked for.
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
add a metadata round trip (and librdkafka's backoff) to every first produce. The request's new
topics are created together, in one round of the topic manager (one catalogue write, not one
per topic), after its other topics are described. What one client may have auto-created is
bounded by ``kcoord.auto.create.rate`` (kcoord's own, see :mod:`.creation_limits`), not by Kafka's
controller mutation quota.

Authorization, as Kafka's: an all-topics answer leaves out the topics the principal may not
DESCRIBE; a named one it may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED (asked for by id: with
the id and a null name, so the name stays hidden); auto-creation needs
Cluster CREATE or Topic CREATE (else TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from kcoord.apis.access import Op, authorized_operations, cluster_operations, may_cluster, may_topic
from kcoord.apis.broker.creation_limits import CreationBudget, CreationLimits
from kcoord.apis.broker.metadata_answers import (
    NAMED_TOPICS_AT_MOST,
    AllTopicsAnswers,
    NamedTopicsAnswers,
    encode_answer,
)
from kcoord.cluster.identity import Node
from kcoord.cluster.loop_slices import LoopSlices
from kcoord.cluster.topic_manager import TopicInfo, TopicManager
from kcoord.cluster.topic_names import topic_name_problem
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import EncodedResponse
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.protocol.repeated_requests import RepeatedRequests
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = [
    "broker_entries",
    "broker_entry",
    "handle_metadata",
]

ZERO_UUID = uuid.UUID(int=0)


def broker_entry(node: Node, listener_name: str) -> dict[str, Any]:
    """This node as a Metadata/DescribeCluster broker entry (DescribeCluster renames node_id), with the
    advertised address of the listener the client connected to."""
    host, port = node.address_for(listener_name)
    return {"node_id": node.node_id, "host": host, "port": port, "rack": None}


def broker_entries(node: Node, listener_name: str) -> list[dict[str, Any]]:
    """Every live node of the cluster (this one always among them, at the address of the listener the
    client used), or this node alone."""
    this = broker_entry(node, listener_name)
    if node.directory is None:
        return [this]
    entries = [
        {"node_id": node_id, "host": host, "port": port, "rack": None}
        for node_id, host, port in node.directory.brokers()
        if node_id != node.node_id
    ]
    return sorted([this, *entries], key=lambda entry: int(entry["node_id"]))


def _partition_entry(node: Node, topic: str, index: int) -> dict[str, Any]:
    """One partition, led by this node alone or in a cluster by its owner (none: LEADER_NOT_AVAILABLE)."""
    leader: int | None = node.node_id if node.directory is None else node.directory.leader(topic, index)
    return {
        "error_code": ErrorCode.none if leader is not None else ErrorCode.leader_not_available,
        "partition_index": index,
        "leader_id": -1 if leader is None else leader,
        "leader_epoch": 0 if node.directory is None else node.directory.leader_epoch(topic, index),
        "replica_nodes": [] if leader is None else [leader],
        "isr_nodes": [] if leader is None else [leader],
        "offline_replicas": [],
    }


def _topic_entry(node: Node, info: TopicInfo, operations: int) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": [_partition_entry(node, info.name, index) for index in range(info.partitions)],
        "topic_authorized_operations": operations,
    }


def _error_entry(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
    }


def _described(
    ctx: RequestContext,
    authorizer: Authorizer,
    node: Node,
    info: TopicInfo,
    with_ops: bool,
    *,
    by_id: bool = False,
) -> dict[str, Any]:
    """The topic's entry, or TOPIC_AUTHORIZATION_FAILED if the principal may not DESCRIBE it: with
    the name asked for and a zero id, or, asked for by id, with that id and a null name (Kafka
    holds an id no secret, a name one)."""
    if not may_topic(ctx, authorizer, Op.DESCRIBE, info.name):
        if by_id:
            return _error_entry(None, ErrorCode.topic_authorization_failed, info.topic_id)
        return _error_entry(info.name, ErrorCode.topic_authorization_failed)
    operations = authorized_operations(ctx, authorizer, ResourceType.TOPIC, info.name, asked=with_ops)
    return _topic_entry(node, info, operations)


@dataclass(frozen=True, slots=True)
class _ToCreate:
    """A requested topic to auto-create: created with the request's others, then described."""

    name: str


async def _requested_topic(
    ctx: RequestContext,
    topics: TopicManager,
    authorizer: Authorizer,
    node: Node,
    name: str | None,
    topic_id: uuid.UUID | None,
    auto_create: bool,
    with_ops: bool,
    budget: CreationBudget | None = None,
) -> dict[str, Any] | _ToCreate:
    if name is None:
        info = topics.get_by_id(topic_id) if topic_id is not None else None
        if info is None:
            unknown = ErrorCode.unknown_topic_id
            return _error_entry(None if ctx.api_version >= 12 else "", unknown, topic_id or ZERO_UUID)
        return _described(ctx, authorizer, node, info, with_ops, by_id=True)
    if topic_name_problem(name) is not None:
        return _error_entry(name, ErrorCode.invalid_topic_exception)
    if not may_topic(ctx, authorizer, Op.DESCRIBE, name):
        return _error_entry(name, ErrorCode.topic_authorization_failed)
    info = topics.get(name)
    if info is None and auto_create:
        if not _may_create(ctx, authorizer, name):
            return _error_entry(name, ErrorCode.topic_authorization_failed)
        if budget is not None and budget.refusal(topics.default_partitions, deferred=True) is not None:
            return _error_entry(name, ErrorCode.unknown_topic_or_partition)
        return _ToCreate(name)
    if info is None:
        return _error_entry(name, ErrorCode.unknown_topic_or_partition)
    return _described(ctx, authorizer, node, info, with_ops)


async def _create_requested(
    ctx: RequestContext,
    topics: TopicManager,
    authorizer: Authorizer,
    node: Node,
    entries: list[dict[str, Any] | _ToCreate],
    with_ops: bool,
) -> list[dict[str, Any]]:
    """The entries with the topics to create created, in one round, and described in their place."""
    names = [entry.name for entry in entries if isinstance(entry, _ToCreate)]
    created = await topics.ensure_many(names) if names else {}
    described: list[dict[str, Any]] = []
    slices = LoopSlices()
    for entry in entries:
        await slices.pause()
        if not isinstance(entry, _ToCreate):
            described.append(entry)
            continue
        info = created[entry.name]
        if isinstance(info, KafkaError):
            described.append(_error_entry(entry.name, info.code))
        elif info is None:
            described.append(_error_entry(entry.name, ErrorCode.unknown_topic_or_partition))
        else:
            described.append(_described(ctx, authorizer, node, info, with_ops))
    return described


def _may_create(ctx: RequestContext, authorizer: Authorizer, name: str) -> bool:
    return may_cluster(ctx, authorizer, Op.CREATE) or may_topic(ctx, authorizer, Op.CREATE, name)


def metadata_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    """Every requested topic carries the error (the response has no top-level error before v13)."""
    requested = getattr(request, "topics", None) or ()
    return {
        "brokers": [],
        "topics": [_error_entry(getattr(t, "name", None) or "", code) for t in requested],
        "error_code": code,
    }


SLICE = 500
"""Topics answered between two yields to the event loop, so a Metadata request for 100,000 topics
does not hold up other clients' heartbeats while its answer is built."""


def api(
    topics: TopicManager,
    node: Node,
    *,
    auto_create: bool,
    creation: CreationLimits | None = None,
    authorizer: Authorizer,
) -> ApiSpec:
    """``auto_create``: ``auto.create.topics.enable``; ``creation``: what auto-creation may create."""
    handler = functools.partial(
        handle_metadata,
        topics=topics,
        node=node,
        auto_create_enabled=auto_create,
        creation=creation,
        all_topics=AllTopicsAnswers(topics),
        named_answers=NamedTopicsAnswers(topics),
        authorizer=authorizer,
    )
    return ApiSpec(
        ApiKey.METADATA,
        "Metadata",
        0,
        13,
        handler,
        metadata_error_response,
        RepeatedRequests(ApiKey.METADATA),
    )


async def handle_metadata(
    ctx: RequestContext,
    request: Any,
    *,
    topics: TopicManager,
    node: Node,
    auto_create_enabled: bool,
    creation: CreationLimits | None = None,
    all_topics: AllTopicsAnswers | None = None,
    named_answers: NamedTopicsAnswers | None = None,
    authorizer: Authorizer,
) -> dict[str, Any] | EncodedResponse:
    version = ctx.api_version
    listener = ctx.connection.listener_name
    with_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    include_cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    requested = request.topics
    if requested is None or (version == 0 and not requested):

        async def build_all() -> dict[str, Any]:
            entries = []
            for index, info in enumerate(topics.topics()):
                if index and index % SLICE == 0:
                    await asyncio.sleep(0)
                if may_topic(ctx, authorizer, Op.DESCRIBE, info.name):
                    operations = authorized_operations(
                        ctx, authorizer, ResourceType.TOPIC, info.name, asked=with_ops
                    )
                    entries.append(_topic_entry(node, info, operations))
            return _answer(ctx, authorizer, node, listener, entries, include_cluster_ops, 0)

        if all_topics is None:
            return await encode_answer(version, await build_all())
        key = (with_ops, include_cluster_ops, _depends_on(ctx, authorizer, node, listener))
        return await all_topics.answer(version, key, build_all)
    named = named_answers if named_answers is not None and len(requested) <= NAMED_TOPICS_AT_MOST else None
    if named is not None:
        generation = named.generation
        named_key = (version, request, _depends_on(ctx, authorizer, node, listener))
        cached = named.get(named_key)
        if cached is not None:
            return cached
    auto_create = bool(getattr(request, "allow_auto_topic_creation", True))
    auto_create = auto_create and auto_create_enabled
    budget = (
        creation.budget(ctx, quota_error=False, auto_create=True)
        if creation is not None and auto_create
        else None
    )
    entries: list[dict[str, Any] | _ToCreate] = []
    seen: set[tuple[str | None, uuid.UUID | None]] = set()
    for index, topic in enumerate(requested):
        if index and index % SLICE == 0:
            await asyncio.sleep(0)
        name: str | None = topic.name
        topic_id: uuid.UUID | None = getattr(topic, "topic_id", None)
        if name is not None or topic_id == ZERO_UUID:
            topic_id = None
        if (name, topic_id) in seen:
            continue
        seen.add((name, topic_id))
        entries.append(
            await _requested_topic(
                ctx, topics, authorizer, node, name, topic_id, auto_create, with_ops, budget
            )
        )
    throttle_ms = budget.throttle_ms if budget is not None else 0
    described = await _create_requested(ctx, topics, authorizer, node, entries, with_ops)
    answer = _answer(ctx, authorizer, node, listener, described, include_cluster_ops, throttle_ms)
    if named is not None and not any(isinstance(entry, _ToCreate) for entry in entries):
        return named.keep(named_key, version, answer, generation)
    return await encode_answer(version, answer)


def _depends_on(ctx: RequestContext, authorizer: Authorizer, node: Node, listener: str) -> Hashable:
    """What a cached answer depends on besides the request and the catalogue (the caches drop
    everything when it changes): what this principal from this host may see (the ACLs' version
    included), the listener's address, and in a cluster the live nodes and partition owners."""
    directory = node.directory
    return (
        node.address_for(listener),
        node.cluster_id,
        authorizer.decision_key(ctx.principal, ctx.client_host),
        None if directory is None else directory.version(),
    )


def _answer(
    ctx: RequestContext,
    authorizer: Authorizer,
    node: Node,
    listener_name: str,
    entries: list[dict[str, Any]],
    include_cluster_ops: bool,
    throttle_ms: int,
) -> dict[str, Any]:
    cluster_ops = cluster_operations(ctx, authorizer, asked=include_cluster_ops)
    return {
        "throttle_time": throttle_ms,
        "brokers": broker_entries(node, listener_name),
        "cluster_id": node.cluster_id,
        "controller_id": node.node_id,
        "topics": entries,
        "cluster_authorized_operations": cluster_ops,
        "error_code": ErrorCode.none,
    }
