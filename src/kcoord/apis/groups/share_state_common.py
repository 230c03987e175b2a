"""What ReadShareGroupState and WriteShareGroupState share: both are served by this node's share
coordinator (a family of :class:`~kcoord.apis.wiring.OnePartApi`), both need Cluster
CLUSTER_ACTION (other nodes send them, never clients), and both answer per partition of each
topic id in the request, under the request's group id."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from kcoord.apis.access import Op, may_cluster
from kcoord.apis.wiring import OnePartApi
from kcoord.coordinator.share.state_records import ShareStateKey
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.share_coordinator import ShareCoordinator
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["PartitionAnswer", "PartitionRefusal", "ShareStateApi", "share_state_api"]

PartitionAnswer = Callable[[ShareCoordinator, ShareStateKey, Any], Awaitable[dict[str, Any]]]
"""``(the share coordinator, the share partition's key, its entry of the request) -> its entry of
the answer``."""

PartitionRefusal = Callable[[int, ErrorCode], dict[str, Any]]
"""``(partition, error code) -> its entry of the answer``."""


class ShareStateApi(OnePartApi[ShareCoordinator]):
    """A share state RPC: its handler takes the share coordinator (``coordinator``) and the
    authorizer."""

    __slots__ = ()
    part = "coordinator"


def share_state_api(
    key: ApiKey,
    name: str,
    min_version: int,
    max_version: int,
    answer: PartitionAnswer,
    refused: PartitionRefusal,
) -> ShareStateApi:
    """The RPC answering each partition of the request with ``answer``; its error answer (and its
    answer without CLUSTER_ACTION) is every partition ``refused`` with the code."""

    async def handle(
        ctx: RequestContext, request: Any, *, coordinator: ShareCoordinator, authorizer: Authorizer
    ) -> dict[str, Any]:
        return await answer_each_partition(
            ctx, request, authorizer, functools.partial(answer, coordinator), refused
        )

    def error(request: Any, code: ErrorCode) -> dict[str, Any]:
        return error_for_each_partition(request, refused, code)

    return ShareStateApi(key, name, min_version, max_version, handle, error)


def error_for_each_partition(request: Any, answer: PartitionRefusal, code: ErrorCode) -> dict[str, Any]:
    """Every partition of the request answered ``answer(partition, code)``."""
    return {
        "results": [
            {
                "topic_id": topic.topic_id,
                "partitions": [answer(int(p.partition), code) for p in topic.partitions],
            }
            for topic in request.topics
        ]
    }


async def answer_each_partition(
    ctx: RequestContext,
    request: Any,
    authorizer: Authorizer,
    answer: Callable[[ShareStateKey, Any], Awaitable[dict[str, Any]]],
    refused: PartitionRefusal,
) -> dict[str, Any]:
    """``answer`` for each partition of the request, one after another in request order; without
    CLUSTER_ACTION every partition is ``refused`` with CLUSTER_AUTHORIZATION_FAILED, as Kafka."""
    if not may_cluster(ctx, authorizer, Op.CLUSTER_ACTION):
        return error_for_each_partition(request, refused, ErrorCode.cluster_authorization_failed)
    results = []
    for topic in request.topics:
        partitions = [
            await answer(ShareStateKey(request.group_id, topic.topic_id, int(p.partition)), p)
            for p in topic.partitions
        ]
        results.append({"topic_id": topic.topic_id, "partitions": partitions})
    return {"results": results}
