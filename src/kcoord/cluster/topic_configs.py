"""Per-topic configuration: Kafka's topic config names, their broker-level defaults, validation.

A topic stores only its overrides (``{"retention.ms": "3600000"}``, values as strings, the way
Kafka keeps them). The effective value of a config is the override, else the node's setting
of the broker synonym (``log.retention.ms``) when kcoord has that setting, else Kafka's default.

Configs that take effect in kcoord: ``retention.ms``, ``retention.bytes``, ``segment.bytes``,
``segment.ms``, ``index.interval.bytes``, ``message.timestamp.type``, ``flush.ms`` (the fsync
period when ``log.flush.policy=interval``) and ``max.message.bytes``. The others are accepted,
validated, kept and described, so that tools which set them (Kafka Streams, Connect, Debezium)
work, but nothing acts on them: kcoord has one replica and no compaction of user topics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from kcoord.config import Settings
from kcoord.config.definitions import BY_NAME
from kcoord.config.settings import DYNAMIC_DEFAULT_SOURCE, DYNAMIC_SOURCE
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.api import CleanupPolicy, LogConfig

__all__ = [
    "TOPIC_CONFIGS",
    "ConfigEntry",
    "ConfigSource",
    "ConfigType",
    "TopicConfigDef",
    "altered_topic_configs",
    "describe_topic_configs",
    "effective_value",
    "log_config_for",
    "render_setting",
    "validate_topic_configs",
]

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_LONG_MAX = str(_INT64_MAX)


class ConfigType(IntEnum):
    """DescribeConfigs ``config_type`` (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    PASSWORD = 8


class ConfigSource(IntEnum):
    """DescribeConfigs ``config_source`` (v1+) and synonym ``source``."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


Parser = Callable[[str], str]
"""Validates a raw value and returns its canonical string form; raises ``ValueError``."""


def _integer(low: int, high: int) -> Parser:
    def parse(raw: str) -> str:
        value = int(raw.strip())
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return str(value)

    return parse


def _boolean(raw: str) -> str:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise ValueError("must be true or false")
    return text


def _ratio(raw: str) -> str:
    value = float(raw.strip())
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0 and 1")
    return str(value)


def _one_of(*choices: str) -> Parser:
    def parse(raw: str) -> str:
        for choice in choices:
            if raw.strip().lower() == choice.lower():
                return choice
        raise ValueError(f"must be one of {', '.join(choices)}")

    return parse


def _subset_of(*choices: str) -> Parser:
    def parse(raw: str) -> str:
        items = [item.strip().lower() for item in raw.split(",") if item.strip()]
        if not items or any(item not in choices for item in items):
            raise ValueError(f"must be a comma-separated list of {', '.join(choices)}")
        return ",".join(dict.fromkeys(items))

    return parse


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    kind: ConfigType
    kafka_default: str
    """Kafka's default, used when kcoord has no setting named ``broker_synonym``."""
    broker_synonym: str
    parse: Parser
    doc: str


def _def(name: str, kind: ConfigType, default: Any, synonym: str, parse: Parser, doc: str) -> TopicConfigDef:
    return TopicConfigDef(name, kind, str(default), synonym, parse, doc)


_B, _S, _I, _L, _D, _LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

# fmt: off
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        _def("cleanup.policy", _LIST, "delete", "log.cleanup.policy", _subset_of("delete", "compact"),
             "delete and/or compact old segments."),
        _def("compression.type", _S, "producer", "compression.type",
             _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
             "Compression kept on disk (kcoord keeps the producer's)."),
        _def("delete.retention.ms", _L, 86400000, "log.cleaner.delete.retention.ms", _integer(0, _INT64_MAX),
             "How long delete tombstones are kept on compacted topics."),
        _def("file.delete.delay.ms", _L, 60000, "log.segment.delete.delay.ms", _integer(0, _INT64_MAX),
             "Delay before a deleted segment's file is removed."),
        _def("flush.messages", _L, _LONG_MAX, "log.flush.interval.messages", _integer(1, _INT64_MAX),
             "Messages between forced fsyncs."),
        _def("flush.ms", _L, _LONG_MAX, "log.flush.interval.ms", _integer(0, _INT64_MAX),
             "fsync period when log.flush.policy=interval."),
        _def("index.interval.bytes", _I, 4096, "log.index.interval.bytes", _integer(0, _INT32_MAX),
             "Bytes between sparse offset index entries."),
        _def("max.compaction.lag.ms", _L, _LONG_MAX, "log.cleaner.max.compaction.lag.ms",
             _integer(1, _INT64_MAX), "Longest time a message stays uncompacted."),
        _def("max.message.bytes", _I, 1048588, "message.max.bytes", _integer(0, _INT32_MAX),
             "Largest record batch accepted."),
        _def("message.timestamp.after.max.ms", _L, _LONG_MAX, "log.message.timestamp.after.max.ms",
             _integer(0, _INT64_MAX), "How far in the future a CreateTime timestamp may be."),
        _def("message.timestamp.before.max.ms", _L, _LONG_MAX, "log.message.timestamp.before.max.ms",
             _integer(0, _INT64_MAX), "How far in the past a CreateTime timestamp may be."),
        _def("message.timestamp.type", _S, "CreateTime", "log.message.timestamp.type",
             _one_of("CreateTime", "LogAppendTime"), "Which timestamp the log keeps."),
        _def("min.cleanable.dirty.ratio", _D, "0.5", "log.cleaner.min.cleanable.ratio", _ratio,
             "Dirty ratio that triggers compaction."),
        _def("min.compaction.lag.ms", _L, 0, "log.cleaner.min.compaction.lag.ms", _integer(0, _INT64_MAX),
             "Shortest time a message stays uncompacted."),
        _def("min.insync.replicas", _I, 1, "min.insync.replicas", _integer(1, _INT32_MAX),
             "Replicas that must acknowledge acks=all (one node: always met)."),
        _def("preallocate", _B, "false", "log.preallocate", _boolean, "Preallocate segment files."),
        _def("retention.bytes", _L, -1, "log.retention.bytes", _integer(-1, _INT64_MAX),
             "Partition size past which old segments are deleted (-1: no limit)."),
        _def("retention.ms", _L, 604800000, "log.retention.ms", _integer(-1, _INT64_MAX),
             "Age past which old segments are deleted (-1: forever)."),
        _def("segment.bytes", _I, 1073741824, "log.segment.bytes", _integer(14, _INT32_MAX),
             "Segment size before a roll."),
        _def("segment.index.bytes", _I, 10485760, "log.index.size.max.bytes", _integer(4, _INT32_MAX),
             "Largest offset index file."),
        _def("segment.jitter.ms", _L, 0, "log.roll.jitter.ms", _integer(0, _INT64_MAX),
             "Random jitter subtracted from segment.ms."),
        _def("segment.ms", _L, 604800000, "log.roll.ms", _integer(1, _INT64_MAX),
             "Segment age before a roll."),
        _def("unclean.leader.election.enable", _B, "false", "unclean.leader.election.enable", _boolean,
             "Allow out-of-sync leaders (one node: no effect)."),
    )
}
# fmt: on


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Canonical overrides from a client's configs; ``KafkaError(INVALID_CONFIG)`` naming the bad one."""
    result: dict[str, str] = {}
    for name, raw in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
        if raw is None:
            raise KafkaError(ErrorCode.invalid_config, f"Null value not supported for topic config {name}")
        try:
            result[name] = definition.parse(raw)
        except ValueError as exc:
            raise KafkaError(ErrorCode.invalid_config, f"Invalid value {raw!r} for {name}: {exc}") from exc
    return result


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
"""IncrementalAlterConfigs' ``config_operation`` values."""


def altered_topic_configs(
    overrides: Mapping[str, str], operations: Sequence[tuple[str, int, str | None]], settings: Settings
) -> dict[str, str]:
    """A topic's overrides after IncrementalAlterConfigs' ``(name, operation, value)`` steps, as
    Kafka applies them: SET replaces, DELETE drops the override (back to the broker default),
    APPEND and SUBTRACT add or remove items of a list config's current value. ``KafkaError``:
    INVALID_REQUEST for a name given twice or an unknown operation, INVALID_CONFIG otherwise."""
    names = [name for name, _, _ in operations]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    result = dict(overrides)
    for name, operation, value in operations:
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
        if operation == DELETE:
            result.pop(name, None)
            continue
        if operation not in (SET, APPEND, SUBTRACT):
            raise KafkaError(ErrorCode.invalid_request, f"Unknown config operation {operation} for {name}")
        if value is None:
            raise KafkaError(ErrorCode.invalid_config, f"Null value not supported for topic config {name}")
        if operation == SET:
            result[name] = value
            continue
        if definition.kind is not ConfigType.LIST:
            raise KafkaError(
                ErrorCode.invalid_config, f"Config value append is not allowed for config key: {name}"
            )
        current = [item for item in effective_value(name, result, settings).split(",") if item]
        items = [item.strip() for item in value.split(",") if item.strip()]
        if operation == APPEND:
            merged = list(dict.fromkeys(current + items))
        else:
            merged = [item for item in current if item not in items]
        result[name] = ",".join(merged)
    return validate_topic_configs(result)


def render_setting(value: Any) -> str:
    """A setting's value the way Kafka prints it (``true``, ``a,b``, ``host:port``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        if len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int):
            return f"{value[0]}:{value[1]}"
        return ",".join(str(item) for item in value)
    return str(value)


def config_source_of(settings_source: str) -> ConfigSource:
    """Where a setting's value came from (:meth:`Settings.source`) as DescribeConfigs names it."""
    if settings_source == "default":
        return ConfigSource.DEFAULT_CONFIG
    if settings_source == DYNAMIC_SOURCE:
        return ConfigSource.DYNAMIC_BROKER_CONFIG
    if settings_source == DYNAMIC_DEFAULT_SOURCE:
        return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return ConfigSource.STATIC_BROKER_CONFIG


def _broker_default(definition: TopicConfigDef, settings: Settings) -> tuple[str, ConfigSource]:
    synonym = definition.broker_synonym
    if synonym in BY_NAME:
        return render_setting(settings[synonym]), config_source_of(settings.source(synonym))
    return definition.kafka_default, ConfigSource.DEFAULT_CONFIG


def _built_in_default(definition: TopicConfigDef) -> str:
    setting = BY_NAME.get(definition.broker_synonym)
    return definition.kafka_default if setting is None else render_setting(setting.default)


def effective_value(name: str, overrides: Mapping[str, str], settings: Settings) -> str:
    """The value topic config ``name`` has for a topic with ``overrides``."""
    if name in overrides:
        return overrides[name]
    return _broker_default(TOPIC_CONFIGS[name], settings)[0]


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs and CreateTopics v5+ report it."""

    name: str
    value: str | None
    source: ConfigSource
    kind: ConfigType
    read_only: bool
    doc: str
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()


def describe_topic_configs(overrides: Mapping[str, str], settings: Settings) -> list[ConfigEntry]:
    """Every topic config of a topic, with where its value comes from and its synonyms (most
    specific first, as Kafka lists them)."""
    entries: list[ConfigEntry] = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        default_value, default_source = _broker_default(definition, settings)
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if default_source != ConfigSource.DEFAULT_CONFIG:
            synonyms.append((definition.broker_synonym, default_value, default_source))
        synonyms.append(
            (definition.broker_synonym, _built_in_default(definition), ConfigSource.DEFAULT_CONFIG)
        )
        value, source = (
            (overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG)
            if name in overrides
            else (
                default_value,
                default_source,
            )
        )
        entries.append(
            ConfigEntry(name, value, source, definition.kind, False, definition.doc, tuple(synonyms))
        )
    return entries


def log_config_for(overrides: Mapping[str, str], settings: Settings) -> LogConfig:
    """The storage engine's config for a partition of a topic with ``overrides``."""

    def number(name: str) -> int:
        return int(effective_value(name, overrides, settings))

    timestamp_type = effective_value("message.timestamp.type", overrides, settings)
    return LogConfig(
        segment_bytes=number("segment.bytes"),
        segment_ms=number("segment.ms"),
        retention_ms=number("retention.ms"),
        retention_bytes=number("retention.bytes"),
        index_interval_bytes=number("index.interval.bytes"),
        flush_policy="interval" if settings["log.flush.policy"] == "interval" else "always",
        flush_interval_ms=number("flush.ms"),
        message_timestamp_type="LogAppendTime" if timestamp_type == "LogAppendTime" else "CreateTime",
        cleanup_policy=_cleanup_policy(effective_value("cleanup.policy", overrides, settings)),
        delete_retention_ms=number("delete.retention.ms"),
        min_cleanable_dirty_ratio=float(effective_value("min.cleanable.dirty.ratio", overrides, settings)),
        min_compaction_lag_ms=number("min.compaction.lag.ms"),
    )


def _cleanup_policy(raw: str) -> CleanupPolicy:
    policies = {p.strip() for p in raw.split(",") if p.strip()}
    if policies == {"compact"}:
        return "compact"
    if policies == {"compact", "delete"}:
        return "compact,delete"
    return "delete"
