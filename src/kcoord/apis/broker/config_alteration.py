"""What IncrementalAlterConfigs (44) and AlterConfigs (33) share: one resource altered by a list of
``(name, operation, value)`` steps.

IncrementalAlterConfigs sends the steps. AlterConfigs sends the whole new set of a resource's
configs, which :func:`replacement` turns into steps against the current set (DELETE for every
config not given, SET for every one given), so both APIs validate, store and apply in one place.
Each resource succeeds or fails alone, as in Kafka:

- TOPIC (2): the topic configs of :mod:`kcoord.cluster.topic_configs`, validated (INVALID_CONFIG;
  a name given twice: INVALID_REQUEST) and stored in the topic catalogue before the answer (in a
  cluster: committed in PostgreSQL, and every node applies it within a renewal interval). The
  topic's logs take the new retention, segment and size limits at once. Unknown topics answer
  UNKNOWN_TOPIC_OR_PARTITION, internal ones INVALID_REQUEST. Needs Topic ALTER_CONFIGS (else
  TOPIC_AUTHORIZATION_FAILED).
- BROKER (4), named by this node's id (its own configs) or ``""`` (the cluster default): the
  dynamic broker configs of :mod:`kcoord.config.dynamic`, stored (``broker-configs.json``, or the
  shared table in a cluster) and applied at once (:mod:`kcoord.cluster.broker_configs`). Any other
  setting: INVALID_REQUEST "Cannot update these configs dynamically", as Kafka. Another node's id:
  INVALID_REQUEST (clients send a broker's configs to that broker). Needs Cluster ALTER_CONFIGS
  (else CLUSTER_AUTHORIZATION_FAILED).
- GROUP (32): ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``, validated
  (known names, positive, session timeout above the heartbeat interval; else INVALID_CONFIG) and
  written to the data dir before the answer (:class:`~kcoord.runtime.group_config_store.GroupConfigStore`).
  Needs Group ALTER_CONFIGS (else GROUP_AUTHORIZATION_FAILED).

``validate_only`` checks without storing. Other resource types: INVALID_REQUEST.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from kcoord.apis.access import Op, may_cluster, may_group, may_topic
from kcoord.apis.broker.describe_configs import RESOURCE_BROKER, RESOURCE_TOPIC
from kcoord.apis.broker.group_config_entries import RESOURCE_GROUP, group_config_defaults
from kcoord.apis.wiring import DeclaredApi
from kcoord.cluster.broker_configs import DEFAULT_RESOURCE, BrokerConfigs
from kcoord.cluster.topic_configs import DELETE, SET, altered_topic_configs
from kcoord.cluster.topic_manager import TopicManager
from kcoord.config import Settings
from kcoord.config.dynamic import DynamicConfigError, altered_broker_configs
from kcoord.coordinator.consumer.group_configs import ConfigValue, GroupConfigError, altered
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.runtime.group_config_store import GroupConfigStore
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = [
    "ConfigAlterationApi",
    "ConfigTargets",
    "Operations",
    "Step",
    "alter_resource",
    "alter_resources",
    "alteration_api",
    "replacement",
    "resource_answer",
    "resources_error_response",
]

log = structlog.get_logger(__name__)

Step = tuple[str, int, str | None]
Operations = Callable[[Mapping[str, str]], Sequence[Step]]
"""The steps to apply, given the resource's current configs."""


def replacement(configs: Sequence[tuple[str, str | None]]) -> Operations:
    """AlterConfigs' whole new set as steps: drop what is not given, set what is."""

    def steps(current: Mapping[str, str]) -> list[Step]:
        given = {name for name, _ in configs}
        dropped: list[Step] = [(name, DELETE, None) for name in current if name not in given]
        return dropped + [(name, SET, value) for name, value in configs]

    return steps


@dataclass(frozen=True, slots=True)
class ConfigTargets:
    """What config alterations change, and who may."""

    settings: Settings
    authorizer: Authorizer
    topics: TopicManager
    groups: GroupConfigStore
    brokers: BrokerConfigs


def resource_answer(
    resource: Any, code: ErrorCode = ErrorCode.none, message: str | None = None
) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }


def resources_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    """AlterConfigs' and IncrementalAlterConfigs' answer when the whole request fails: each resource
    with the code."""
    return {"throttle_time": 0, "responses": [resource_answer(r, code) for r in request.resources]}


class ConfigAlterationApi(DeclaredApi):
    """AlterConfigs or IncrementalAlterConfigs: its handler takes the :class:`ConfigTargets`."""

    __slots__ = ()

    def __call__(self, targets: ConfigTargets) -> ApiSpec:
        return self.bind(targets=targets)


def alteration_api(
    key: ApiKey, name: str, max_version: int, operations: Callable[[Any], Operations]
) -> ConfigAlterationApi:
    """AlterConfigs or IncrementalAlterConfigs (from version 0): each resource of the request
    altered by the operations ``operations(resource)`` reads from its entry."""
    handler = functools.partial(alter_resources, operations=operations)
    return ConfigAlterationApi(key, name, 0, max_version, handler, resources_error_response)


async def alter_resources(
    ctx: RequestContext, request: Any, *, targets: ConfigTargets, operations: Callable[[Any], Operations]
) -> dict[str, Any]:
    """AlterConfigs' and IncrementalAlterConfigs' answer: each resource altered in turn by the
    operations ``operations(resource)`` reads from its request entry."""
    responses = [
        await alter_resource(ctx, targets, resource, operations(resource), request.validate_only)
        for resource in request.resources
    ]
    return {"throttle_time": 0, "responses": responses}


async def alter_resource(
    ctx: RequestContext, targets: ConfigTargets, resource: Any, operations: Operations, validate_only: bool
) -> dict[str, Any]:
    """Alter one resource; its answer, with the error code that refused it if any."""
    try:
        kind, name = resource.resource_type, resource.resource_name
        if kind == RESOURCE_TOPIC:
            await _alter_topic(ctx, targets, name, operations, validate_only)
        elif kind == RESOURCE_BROKER:
            await _alter_broker(ctx, targets, name, operations, validate_only)
        elif kind == RESOURCE_GROUP:
            await _alter_group(ctx, targets, name, operations, validate_only)
        else:
            raise KafkaError(
                ErrorCode.invalid_request, f"kcoord does not alter configs of resource type {kind}."
            )
    except KafkaError as exc:
        return resource_answer(resource, exc.code, exc.message)
    return resource_answer(resource)


async def _alter_topic(
    ctx: RequestContext, targets: ConfigTargets, name: str, operations: Operations, validate_only: bool
) -> None:
    if not may_topic(ctx, targets.authorizer, Op.ALTER_CONFIGS, name):
        raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
    await targets.topics.alter_configs(
        name,
        lambda current: altered_topic_configs(current, operations(current), targets.settings),
        validate_only,
    )


async def _alter_broker(
    ctx: RequestContext, targets: ConfigTargets, name: str, operations: Operations, validate_only: bool
) -> None:
    if not may_cluster(ctx, targets.authorizer, Op.ALTER_CONFIGS):
        raise KafkaError(ErrorCode.cluster_authorization_failed, "Authorization failed.")
    brokers = targets.brokers
    if name not in (DEFAULT_RESOURCE, str(brokers.node_id)):
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {brokers.node_id} or empty string, but received {name}",
        )
    current = brokers.of(name)
    try:
        values = altered_broker_configs(current, operations(current))
    except DynamicConfigError as exc:
        code = ErrorCode.invalid_request if exc.invalid_request else ErrorCode.invalid_config
        raise KafkaError(code, str(exc)) from None
    if not validate_only:
        await brokers.put(name, values)


async def _alter_group(
    ctx: RequestContext, targets: ConfigTargets, group_id: str, operations: Operations, validate_only: bool
) -> None:
    if not may_group(ctx, targets.authorizer, Op.ALTER_CONFIGS, group_id):
        raise KafkaError(ErrorCode.group_authorization_failed, "Authorization failed.")
    if not group_id:
        raise KafkaError(ErrorCode.invalid_group_id, "Group id must not be empty.")
    store = targets.groups
    defaults = group_config_defaults(targets.settings)

    def change(stored: Mapping[str, ConfigValue]) -> Mapping[str, ConfigValue]:
        steps = list(operations({name: str(value) for name, value in stored.items()}))
        return altered(stored, steps, defaults)

    try:
        if validate_only:
            change(store.overrides.of(group_id))
        else:
            values = await store.alter(group_id, change)
            log.info("group.configs.altered", group=group_id, configs=values)
    except GroupConfigError as exc:
        raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
