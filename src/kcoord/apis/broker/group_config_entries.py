"""The configs of a GROUP config resource (type 32) as DescribeConfigs reports them.

Each of Kafka's consumer group configs is the group's override (source GROUP_CONFIG) or the
node's ``group.consumer.*`` setting, which is also its synonym. ``share.auto.offset.reset`` (share
groups) has no broker setting: it is the override or Kafka's default, ``latest``. Config names are those of
Kafka 4; the group need not exist (Kafka lets a group be tuned before its first member joins).
"""

from __future__ import annotations

from collections.abc import Mapping

from kcoord.cluster.topic_configs import ConfigEntry, ConfigSource, ConfigType
from kcoord.config import Settings
from kcoord.coordinator.consumer.group_configs import (
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
    SHARE_AUTO_OFFSET_RESET,
    ConfigValue,
)
from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = ["BROKER_SYNONYMS", "RESOURCE_GROUP", "group_config_defaults", "group_config_entries"]

RESOURCE_GROUP = 32
"""ConfigResource.Type.GROUP; librdkafka sends it for ``ResourceType.GROUP``."""

BROKER_SYNONYMS = {
    SESSION_TIMEOUT: "group.consumer.session.timeout.ms",
    HEARTBEAT_INTERVAL: "group.consumer.heartbeat.interval.ms",
}

_DOCS = {
    SESSION_TIMEOUT: "The timeout to detect client failures when using the consumer group protocol.",
    HEARTBEAT_INTERVAL: "The heartbeat interval given to the members of a consumer group.",
    SHARE_AUTO_OFFSET_RESET: "Where a share group starts reading a partition it has no state for.",
}
SHARE_AUTO_OFFSET_RESET_DEFAULT = "latest"


def group_config_defaults(settings: Settings) -> dict[str, int]:
    return {name: int(settings[broker]) for name, broker in BROKER_SYNONYMS.items()}


def _broker_source(settings: Settings, name: str) -> ConfigSource:
    if settings.source(name) == "default":
        return ConfigSource.DEFAULT_CONFIG
    return ConfigSource.STATIC_BROKER_CONFIG


def group_config_entries(
    settings: Settings, overrides: Mapping[str, ConfigValue], group_id: str
) -> list[ConfigEntry]:
    if not group_id:
        raise KafkaError(ErrorCode.invalid_group_id, "Group id must not be empty.")
    entries = []
    for name, broker in BROKER_SYNONYMS.items():
        default = (broker, str(settings[broker]), _broker_source(settings, broker))
        if name in overrides:
            value = str(overrides[name])
            synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = (
                (name, value, ConfigSource.GROUP_CONFIG),
                default,
            )
            entries.append(
                ConfigEntry(
                    name, value, ConfigSource.GROUP_CONFIG, ConfigType.INT, False, _DOCS[name], synonyms
                )
            )
        else:
            entries.append(
                ConfigEntry(name, default[1], default[2], ConfigType.INT, False, _DOCS[name], (default,))
            )
    entries.append(_share_auto_offset_reset(overrides))
    return entries


def _share_auto_offset_reset(overrides: Mapping[str, ConfigValue]) -> ConfigEntry:
    name, doc = SHARE_AUTO_OFFSET_RESET, _DOCS[SHARE_AUTO_OFFSET_RESET]
    if name in overrides:
        value = str(overrides[name])
        synonym = ((name, value, ConfigSource.GROUP_CONFIG),)
        return ConfigEntry(name, value, ConfigSource.GROUP_CONFIG, ConfigType.STRING, False, doc, synonym)
    default = SHARE_AUTO_OFFSET_RESET_DEFAULT
    synonyms = ((name, default, ConfigSource.DEFAULT_CONFIG),)
    return ConfigEntry(name, default, ConfigSource.DEFAULT_CONFIG, ConfigType.STRING, False, doc, synonyms)
