"""Topic config validation and the storage config derived from overrides and node settings."""

from __future__ import annotations

import pytest

from kcoord.cluster.topic_configs import (
    ConfigSource,
    describe_topic_configs,
    effective_value,
    log_config_for,
    render_setting,
    validate_topic_configs,
)
from kcoord.protocol.errors import ErrorCode, KafkaError
from tests.apis.broker.topic_app import make_settings


def test_values_are_canonicalised() -> None:
    """Booleans, choices, lists, numbers and ratios are stored in one canonical spelling."""
    assert validate_topic_configs(
        {
            "preallocate": "TRUE",
            "compression.type": "ZSTD",
            "cleanup.policy": "compact, delete,compact",
            "retention.ms": "-1",
            "min.cleanable.dirty.ratio": "0.25",
        }
    ) == {
        "preallocate": "true",
        "compression.type": "zstd",
        "cleanup.policy": "compact,delete",
        "retention.ms": "-1",
        "min.cleanable.dirty.ratio": "0.25",
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.bytes", "13"),
        ("segment.bytes", str(2**31)),
        ("min.cleanable.dirty.ratio", "2"),
        ("preallocate", "yes"),
    ],
)
def test_out_of_range_values_name_the_config(name: str, value: str) -> None:
    """A value outside the config's range or type is INVALID_CONFIG with the config's name in the message."""
    with pytest.raises(KafkaError) as err:
        validate_topic_configs({name: value})
    assert err.value.code == ErrorCode.invalid_config
    assert name in (err.value.message or "")


def test_log_config_takes_overrides_then_settings() -> None:
    """The storage config uses the topic's overrides, then the node's log.* settings and flush policy."""
    settings = make_settings(log_segment_bytes=2048, log_flush_policy="interval", log_flush_interval_ms=250)
    config = log_config_for({"retention.bytes": "4096", "message.timestamp.type": "LogAppendTime"}, settings)
    assert (config.segment_bytes, config.retention_bytes, config.message_timestamp_type) == (
        2048,
        4096,
        "LogAppendTime",
    )
    assert (config.flush_policy, config.flush_interval_ms) == ("interval", 250)
    assert config.retention_ms == 7 * 24 * 3600 * 1000


def test_effective_value_without_kcoord_setting_is_kafkas_default() -> None:
    """A config whose broker synonym kcoord lacks takes Kafka's default."""
    assert effective_value("cleanup.policy", {}, make_settings()) == "delete"
    assert effective_value("cleanup.policy", {"cleanup.policy": "compact"}, make_settings()) == "compact"


def test_describe_marks_only_overrides_as_topic_configs() -> None:
    """Only overridden configs have the DYNAMIC_TOPIC_CONFIG source."""
    entries = describe_topic_configs({"segment.ms": "1000"}, make_settings())
    assert [e.name for e in entries if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG] == ["segment.ms"]


def test_settings_render_as_kafka_prints_them() -> None:
    """Booleans print lower case, lists comma-joined, addresses as host:port."""
    assert [render_setting(v) for v in (True, ("a", "b"), ("127.0.0.1", 9092), 5)] == [
        "true",
        "a,b",
        "127.0.0.1:9092",
        "5",
    ]
