"""DescribeConfigs (key 32), versions 1-4.

- v1: per resource (type, name, optional key filter) every config with value, read_only,
  config_source and is_sensitive; synonyms when ``include_synonyms`` is set.
- v2: no change.  v3: ``include_documentation``; each config carries its type and documentation.
- v4: flexible.

Resources served:
- TOPIC (2): every topic config (see :mod:`kcoord.cluster.topic_configs`). An override has source
  DYNAMIC_TOPIC_CONFIG; otherwise the node's setting of the broker synonym (STATIC_BROKER_CONFIG
  when it was set in the file, environment or flags, DEFAULT_CONFIG when not).
- BROKER (4), named by this node's id: every kcoord setting under its Kafka name. The dynamic broker
  configs (:mod:`kcoord.config.dynamic`) are writable and, once altered, have source
  DYNAMIC_BROKER_CONFIG (this node's) or DYNAMIC_DEFAULT_BROKER_CONFIG (the cluster default); every
  other setting is read-only. Named ``""`` (the cluster default, ``kafka-configs --entity-default``):
  only the cluster-wide dynamic defaults that were set, as Kafka answers.
- GROUP (32): the consumer group configs of Kafka 4 (see :mod:`.group_config_entries`), which
  IncrementalAlterConfigs changes per group.

A null or empty key list means all configs. Other resource types, another node's id, unknown and
illegal topic names fail that resource only, with Kafka's error codes.

Authorization: Topic DESCRIBE_CONFIGS (else TOPIC_AUTHORIZATION_FAILED); a broker's
configs need Cluster DESCRIBE_CONFIGS (else CLUSTER_AUTHORIZATION_FAILED); a group's need Group
DESCRIBE_CONFIGS (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kcoord.apis.access import Op, may_cluster, may_group, may_topic
from kcoord.apis.broker.group_config_entries import RESOURCE_GROUP, group_config_entries
from kcoord.apis.wiring import own_api
from kcoord.cluster.topic_configs import (
    ConfigEntry,
    ConfigSource,
    ConfigType,
    config_source_of,
    describe_topic_configs,
    render_setting,
)
from kcoord.cluster.topic_manager import TopicManager
from kcoord.cluster.topic_names import topic_name_problem
from kcoord.config import Settings
from kcoord.config.definitions import BY_NAME
from kcoord.config.dynamic import DYNAMIC_BROKER_CONFIGS
from kcoord.config.secrets import is_secret, shown_setting
from kcoord.coordinator.consumer.group_configs import GroupConfigOverrides
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["RESOURCE_BROKER", "RESOURCE_TOPIC", "broker_config_entries", "handle_describe_configs"]

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

_INT32 = range(-(2**31), 2**31)


def _kind_of(value: Any) -> ConfigType:
    if isinstance(value, bool):
        return ConfigType.BOOLEAN
    if isinstance(value, int):
        return ConfigType.INT if value in _INT32 else ConfigType.LONG
    if isinstance(value, tuple) and all(isinstance(item, str) for item in value):
        return ConfigType.LIST
    return ConfigType.STRING


def broker_config_entries(settings: Settings, node_id: int) -> list[ConfigEntry]:
    """Every setting of this node as a broker config (``node.id`` is the one in use); the dynamic
    ones (:data:`~kcoord.config.dynamic.DYNAMIC_BROKER_CONFIGS`) are writable, the rest read-only."""
    entries: list[ConfigEntry] = []
    for name, setting in settings.items():
        value = node_id if name == "node.id" else setting.value
        definition = BY_NAME.get(name)
        source = ConfigSource.STATIC_BROKER_CONFIG if name == "node.id" else config_source_of(setting.source)
        rendered = _shown(name, value)
        synonyms: list[tuple[str, str | None, ConfigSource]] = [(name, rendered, source)]
        if source != ConfigSource.DEFAULT_CONFIG and definition is not None:
            synonyms.append((name, _shown(name, definition.default), ConfigSource.DEFAULT_CONFIG))
        doc = definition.doc if definition is not None else ""
        kind = ConfigType.PASSWORD if is_secret(name) else _kind_of(value)
        read_only = name not in DYNAMIC_BROKER_CONFIGS
        entries.append(ConfigEntry(name, rendered, source, kind, read_only, doc, tuple(synonyms)))
    return entries


def _shown(name: str, value: Any) -> str | None:
    """A setting's value as DescribeConfigs returns it: a secret is null (as Kafka answers for its
    sensitive configs), a URL without its password."""
    if value is None or is_secret(name):
        return None
    return render_setting(shown_setting(name, value))


ClusterDefaults = Callable[[], Mapping[str, str]]
"""The cluster-wide dynamic broker defaults set so far (resource ``""`` of AlterConfigs)."""


def _broker_entries(
    settings: Settings, node_id: int, cluster_defaults: ClusterDefaults, resource_name: str
) -> list[ConfigEntry]:
    if resource_name == "":
        return _cluster_default_entries(cluster_defaults())
    if resource_name != str(node_id):
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {node_id} or empty string, but received {resource_name}",
        )
    return broker_config_entries(settings, node_id)


def _cluster_default_entries(defaults: Mapping[str, str]) -> list[ConfigEntry]:
    """Each cluster-wide default as DYNAMIC_DEFAULT_BROKER_CONFIG, its static default as a synonym."""
    entries: list[ConfigEntry] = []
    for name, text in sorted(defaults.items()):
        definition = BY_NAME.get(name)
        shown = None if is_secret(name) else text
        synonyms: list[tuple[str, str | None, ConfigSource]] = [
            (name, shown, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        ]
        kind = ConfigType.PASSWORD if is_secret(name) else ConfigType.STRING
        doc = ""
        if definition is not None:
            synonyms.append((name, _shown(name, definition.default), ConfigSource.DEFAULT_CONFIG))
            kind = ConfigType.PASSWORD if is_secret(name) else _kind_of(definition.default)
            doc = definition.doc
        source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        entries.append(ConfigEntry(name, shown, source, kind, False, doc, tuple(synonyms)))
    return entries


def _topic_entries(topics: TopicManager, settings: Settings, resource_name: str) -> list[ConfigEntry]:
    problem = topic_name_problem(resource_name)
    if problem is not None:
        raise KafkaError(ErrorCode.invalid_topic_exception, problem)
    info = topics.get(resource_name)
    if info is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{resource_name}' does not exist.")
    return describe_topic_configs(info.configs, settings)


def _config_result(entry: ConfigEntry, synonyms: bool, documentation: bool) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "config_source": int(entry.source),
        "is_sensitive": is_secret(entry.name),
        "synonyms": [
            {"name": name, "value": value, "source": int(source)} for name, value, source in entry.synonyms
        ]
        if synonyms
        else [],
        "config_type": int(entry.kind),
        "documentation": entry.doc if documentation else None,
    }


def _selected(entries: Iterable[ConfigEntry], keys: Sequence[str] | None) -> list[ConfigEntry]:
    if not keys:
        return list(entries)
    wanted = set(keys)
    return [entry for entry in entries if entry.name in wanted]


def _resource_result(
    topics: TopicManager,
    settings: Settings,
    node_id: int,
    cluster_defaults: ClusterDefaults,
    groups: GroupConfigOverrides,
    resource: Any,
    request: Any,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "error_code": ErrorCode.none,
        "error_message": None,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "configs": [],
    }
    try:
        if resource.resource_type == RESOURCE_TOPIC:
            entries = _topic_entries(topics, settings, resource.resource_name)
        elif resource.resource_type == RESOURCE_BROKER:
            entries = _broker_entries(settings, node_id, cluster_defaults, resource.resource_name)
        elif resource.resource_type == RESOURCE_GROUP:
            name = resource.resource_name
            entries = group_config_entries(settings, groups.of(name), name)
        else:
            raise KafkaError(
                ErrorCode.invalid_request, f"Resource type {resource.resource_type} is not supported."
            )
    except KafkaError as exc:
        return {**result, "error_code": exc.code, "error_message": exc.message}
    synonyms = bool(getattr(request, "include_synonyms", False))
    documentation = bool(getattr(request, "include_documentation", False))
    result["configs"] = [
        _config_result(entry, synonyms, documentation)
        for entry in _selected(entries, resource.configuration_keys)
    ]
    return result


def describe_configs_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "results": [
            {
                "error_code": code,
                "error_message": None,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "configs": [],
            }
            for r in request.resources
        ],
    }


async def handle_describe_configs(
    ctx: RequestContext,
    request: Any,
    *,
    topics: TopicManager,
    settings: Settings,
    node_id: int,
    authorizer: Authorizer,
    group_configs: GroupConfigOverrides,
    cluster_defaults: ClusterDefaults,
) -> dict[str, Any]:
    results = [
        _denied(r, code)
        if (code := _refusal(ctx, authorizer, r)) is not None
        else _resource_result(topics, settings, node_id, cluster_defaults, group_configs, r, request)
        for r in request.resources
    ]
    return {"throttle_time": 0, "results": results}


def _refusal(ctx: RequestContext, authorizer: Authorizer, resource: Any) -> ErrorCode | None:
    """DESCRIBE_CONFIGS on the topic, or on the cluster for a broker, as Kafka checks."""
    if resource.resource_type == RESOURCE_TOPIC:
        if not may_topic(ctx, authorizer, Op.DESCRIBE_CONFIGS, resource.resource_name):
            return ErrorCode.topic_authorization_failed
    elif resource.resource_type == RESOURCE_BROKER and not may_cluster(ctx, authorizer, Op.DESCRIBE_CONFIGS):
        return ErrorCode.cluster_authorization_failed
    elif resource.resource_type == RESOURCE_GROUP and not may_group(
        ctx, authorizer, Op.DESCRIBE_CONFIGS, resource.resource_name
    ):
        return ErrorCode.group_authorization_failed
    return None


def _denied(resource: Any, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": "Authorization failed.",
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "configs": [],
    }


api = own_api(
    ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4, handle_describe_configs, describe_configs_error_response
)
