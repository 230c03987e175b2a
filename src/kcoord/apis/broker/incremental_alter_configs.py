"""IncrementalAlterConfigs (key 44), versions 0-1 (v1 flexible), for TOPIC and GROUP resources.

Per resource a list of ``(name, operation, value)``; SET (0) and DELETE (1) apply to every
config, APPEND (2) and SUBTRACT (3) to list configs only (topics' ``cleanup.policy``; groups have
none). Each resource succeeds or fails alone, as in Kafka:

- GROUP (32): ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``, validated
  (known names, positive, session timeout above the heartbeat interval; else INVALID_CONFIG) and
  written to the data dir before the answer (:class:`~kcoord.runtime.group_config_store.GroupConfigStore`).
  ``validate_only`` checks without writing. Needs Group ALTER_CONFIGS (else
  GROUP_AUTHORIZATION_FAILED).
- TOPIC (2): the topic configs of :mod:`kcoord.cluster.topic_configs`, validated (INVALID_CONFIG;
  a name given twice: INVALID_REQUEST) and stored in the topic catalogue before the answer (in a
  cluster: committed in PostgreSQL, and every node applies it within a renewal interval). The
  topic's logs take the new retention, segment and size limits at once. Unknown topics answer
  UNKNOWN_TOPIC_OR_PARTITION, internal ones INVALID_REQUEST. Needs Topic ALTER_CONFIGS (else
  TOPIC_AUTHORIZATION_FAILED).
- BROKER configs are read-only in kcoord: INVALID_REQUEST with a message saying so.
"""

from __future__ import annotations

import functools
from typing import Any

import structlog

from kcoord.apis.access import Op, may_group, may_topic
from kcoord.apis.broker.describe_configs import RESOURCE_TOPIC
from kcoord.apis.broker.group_config_entries import RESOURCE_GROUP, group_config_defaults
from kcoord.cluster.topic_configs import altered_topic_configs
from kcoord.cluster.topic_manager import TopicManager
from kcoord.config import Settings
from kcoord.coordinator.consumer.group_configs import GroupConfigError, altered
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.runtime.group_config_store import GroupConfigStore
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["api", "handle_incremental_alter_configs"]

log = structlog.get_logger(__name__)


def _answer(resource: Any, code: ErrorCode = ErrorCode.none, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }


def error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "responses": [_answer(r, code) for r in request.resources]}


def api(
    store: GroupConfigStore, settings: Settings, *, authorizer: Authorizer, topics: TopicManager
) -> ApiSpec:
    handler = functools.partial(
        handle_incremental_alter_configs, store=store, settings=settings, authorizer=authorizer, topics=topics
    )
    return ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, handler, error_response)


async def _alter_group(
    store: GroupConfigStore, settings: Settings, resource: Any, validate_only: bool
) -> dict[str, Any]:
    group_id = resource.resource_name
    if not group_id:
        raise KafkaError(ErrorCode.invalid_group_id, "Group id must not be empty.")
    operations = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
    defaults = group_config_defaults(settings)
    try:
        if validate_only:
            altered(store.overrides.of(group_id), operations, defaults)
        else:
            values = await store.alter(group_id, lambda current: altered(current, operations, defaults))
            log.info("group.configs.altered", group=group_id, configs=values)
    except GroupConfigError as exc:
        raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
    return _answer(resource)


async def _alter_topic(
    ctx: RequestContext,
    topics: TopicManager,
    settings: Settings,
    authorizer: Authorizer,
    resource: Any,
    validate_only: bool,
) -> dict[str, Any]:
    name = resource.resource_name
    if not may_topic(ctx, authorizer, Op.ALTER_CONFIGS, name):
        raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
    operations = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
    await topics.alter_configs(
        name, lambda current: altered_topic_configs(current, operations, settings), validate_only
    )
    return _answer(resource)


async def handle_incremental_alter_configs(
    ctx: RequestContext,
    request: Any,
    *,
    store: GroupConfigStore,
    settings: Settings,
    authorizer: Authorizer,
    topics: TopicManager,
) -> dict[str, Any]:
    responses = []
    for resource in request.resources:
        try:
            if resource.resource_type == RESOURCE_TOPIC:
                responses.append(
                    await _alter_topic(ctx, topics, settings, authorizer, resource, request.validate_only)
                )
                continue
            if resource.resource_type != RESOURCE_GROUP:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    f"kcoord does not alter configs of resource type {resource.resource_type}.",
                )
            if not may_group(ctx, authorizer, Op.ALTER_CONFIGS, resource.resource_name):
                raise KafkaError(ErrorCode.group_authorization_failed, "Authorization failed.")
            responses.append(await _alter_group(store, settings, resource, request.validate_only))
        except KafkaError as exc:
            responses.append(_answer(resource, exc.code, exc.message))
    return {"throttle_time": 0, "responses": responses}
