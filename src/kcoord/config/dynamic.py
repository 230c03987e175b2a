"""Dynamic broker configs: the settings Kafka lets IncrementalAlterConfigs and AlterConfigs change on
a running broker (``kafka.server.DynamicBrokerConfig``), among those kcoord has.

A BROKER resource is named by a node id (that node's configs, source DYNAMIC_BROKER_CONFIG) or
``""`` (the cluster-wide default, DYNAMIC_DEFAULT_BROKER_CONFIG); a node's own value beats the
default, which beats the file, environment and flags. Kafka's per-key answers are kept: a setting
that cannot change at run time is INVALID_REQUEST "Cannot update these configs dynamically", a bad
value INVALID_CONFIG. Unlike Kafka, which stores unknown names as custom configs, kcoord refuses
them with INVALID_CONFIG, as it refuses a misspelt setting at start.

Pure: this module validates and computes; :mod:`kcoord.cluster.broker_configs` stores and applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kcoord.config.definitions import BY_NAME

__all__ = ["DYNAMIC_BROKER_CONFIGS", "DynamicConfigError", "altered_broker_configs", "stored_value_problem"]

DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    {
        # DynamicConnectionQuota
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        # DynamicLogConfig: the broker defaults of topic configs
        "log.segment.bytes",
        "log.roll.ms",
        "log.retention.ms",
        "log.retention.bytes",
        "log.index.interval.bytes",
        "log.flush.interval.ms",
        "log.message.timestamp.type",
        "message.max.bytes",
    }
)
"""Settings a running kcoord applies at once when altered (connections and every topic's logs)."""

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class DynamicConfigError(ValueError):
    """A refused alteration; ``invalid_request`` tells INVALID_REQUEST from INVALID_CONFIG."""

    def __init__(self, message: str, *, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


def _canonical(name: str, raw: str) -> str:
    """The value as it is stored: checked with the setting's own parser, kept as the client wrote it."""
    try:
        BY_NAME[name].parse(raw)
    except (TypeError, ValueError) as exc:
        raise DynamicConfigError(f"Invalid value {raw} for configuration {name}: {exc}") from None
    return raw.strip()


def stored_value_problem(name: str, value: str) -> str | None:
    """Why a stored dynamic config cannot be applied (hand-edited, or from another kcoord), or None."""
    if name not in DYNAMIC_BROKER_CONFIGS:
        return "not a dynamic broker config"
    try:
        _canonical(name, value)
    except DynamicConfigError as exc:
        return str(exc)
    return None


def altered_broker_configs(
    current: Mapping[str, str], operations: Sequence[tuple[str, int, str | None]]
) -> dict[str, str]:
    """One BROKER resource's dynamic configs after ``(name, operation, value)`` steps (SET replaces,
    DELETE drops back to the static value); :class:`DynamicConfigError` for the first refused key."""
    names = [name for name, _, _ in operations]
    if len(set(names)) != len(names):
        raise DynamicConfigError("Error due to duplicate config keys", invalid_request=True)
    static = sorted(name for name in names if name in BY_NAME and name not in DYNAMIC_BROKER_CONFIGS)
    if static:
        raise DynamicConfigError(
            f"Cannot update these configs dynamically: {', '.join(static)}", invalid_request=True
        )
    result = dict(current)
    for name, operation, value in operations:
        if name not in BY_NAME:
            raise DynamicConfigError(f"Unknown broker config name: {name}")
        if operation == DELETE:
            result.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            raise DynamicConfigError(
                f"Config {name} is not a list: APPEND and SUBTRACT apply to list configs only",
                invalid_request=True,
            )
        elif operation != SET:
            raise DynamicConfigError(f"Unknown config operation {operation} for {name}", invalid_request=True)
        elif value is None:
            raise DynamicConfigError(f"Null value not supported for broker config {name}")
        else:
            result[name] = _canonical(name, value)
    return result
