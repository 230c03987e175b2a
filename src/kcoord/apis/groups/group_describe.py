"""What ConsumerGroupDescribe and ShareGroupDescribe share: their wiring, the per-group checks, the
head of a described group's answer and the answer of a group that is not described.

For each group id: Group DESCRIBE (else GROUP_AUTHORIZATION_FAILED), the coordinator's lookup
(its error, or the kind's own not-found answer), then Topic DESCRIBE on every topic the answer would
name (else TOPIC_AUTHORIZATION_FAILED with no members), and last the described group with the
describer's authorized operations when asked for.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kcoord.apis.access import Op, authorized_operations, may_group, may_topic
from kcoord.apis.wiring import DeclaredApi
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.runtime.group_service import GroupService
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

HIDDEN_TOPICS_MESSAGE = "The group has described topic(s) that the client is not authorized to describe."


class GroupNotDescribedError(KafkaError):
    """Raised by a lookup: the id is not a group of the asked kind (answered with its message)."""


Found = tuple[set[str], Callable[[int], dict[str, Any]]]
"""A group of the asked kind: the topics its answer names, and its answer given the operations."""

Lookup = Callable[[str], Found]
"""Group id -> the group; raises :class:`GroupNotDescribedError`, or the coordinator's KafkaError."""

KindLookup = Callable[[GroupService, TopicManager, str], Found]
"""A group kind's :data:`Lookup`, given the group service and the topic catalogue."""


class GroupDescribeApi(DeclaredApi):
    """ConsumerGroupDescribe or ShareGroupDescribe: its handler takes the group service, the topic
    catalogue and the authorizer."""

    __slots__ = ()

    def __call__(self, groups: GroupService, topics: TopicManager, *, authorizer: Authorizer) -> ApiSpec:
        return self.bind(groups=groups, topics=topics, authorizer=authorizer)


def describe_api(
    key: ApiKey, name: str, min_version: int, max_version: int, lookup: KindLookup
) -> GroupDescribeApi:
    """A describe API of one group kind: Group DESCRIBE per group, as Kafka asks (else
    GROUP_AUTHORIZATION_FAILED for that group), then ``lookup`` and :func:`describe_each`."""
    handler = functools.partial(_describe_kind, lookup=lookup)
    return GroupDescribeApi(key, name, min_version, max_version, handler, describe_error_response)


async def _describe_kind(
    ctx: RequestContext,
    request: Any,
    *,
    groups: GroupService,
    topics: TopicManager,
    authorizer: Authorizer,
    lookup: KindLookup,
) -> dict[str, Any]:
    return describe_each(ctx, request, authorizer, functools.partial(lookup, groups, topics))


def describe_each(
    ctx: RequestContext, request: Any, authorizer: Authorizer, lookup: Lookup
) -> dict[str, Any]:
    """The whole answer: each of ``request.group_ids`` checked and described in turn."""
    answers: list[dict[str, Any]] = []
    for group_id in request.group_ids:
        if not may_group(ctx, authorizer, Op.DESCRIBE, group_id):
            answers.append(failed_group(group_id, ErrorCode.group_authorization_failed, None))
            continue
        try:
            topic_names, answer = lookup(group_id)
        except GroupNotDescribedError as exc:
            answers.append(failed_group(group_id, exc.code, exc.message))
            continue
        except KafkaError as exc:
            answers.append(failed_group(group_id, exc.code, None))
            continue
        if not all(may_topic(ctx, authorizer, Op.DESCRIBE, name) for name in topic_names):
            answers.append(
                failed_group(group_id, ErrorCode.topic_authorization_failed, HIDDEN_TOPICS_MESSAGE)
            )
            continue
        asked = bool(request.include_authorized_operations)
        answers.append(
            answer(authorized_operations(ctx, authorizer, ResourceType.GROUP, group_id, asked=asked))
        )
    return {"groups": answers}


def describe_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    """Every asked group answered ``code``."""
    return {"groups": [failed_group(group_id, code, None) for group_id in request.group_ids]}


def described_group(
    group_id: str, state: str, group_epoch: int, assignment_epoch: int, assignor: str, operations: int
) -> dict[str, Any]:
    """A described group's answer but its members."""
    return {
        "authorized_operations": operations,
        "error_code": ErrorCode.none,
        "group_id": group_id,
        "group_state": state,
        "group_epoch": group_epoch,
        "assignment_epoch": assignment_epoch,
        "assignor_name": assignor,
    }


def failed_group(group_id: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "group_id": group_id,
        "group_state": "Dead",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
    }
