"""Per-group config overrides (Kafka 4's GROUP config resource), the pure part.

Kafka keeps a group's dynamic configs in the metadata log; kcoord keeps them in a file of the data
dir (see :mod:`kcoord.runtime.group_config_store`). The consumer group manager asks this table for
the session timeout and heartbeat interval of one group, so tuning one group leaves the others on
the ``group.consumer.*`` defaults; the share partitions' leader asks it for a share group's
``share.auto.offset.reset`` (a text value: ``earliest`` or ``latest``, Kafka's default ``latest``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "GROUP_CONFIG_NAMES",
    "HEARTBEAT_INTERVAL",
    "SESSION_TIMEOUT",
    "SHARE_AUTO_OFFSET_RESET",
    "ConfigValue",
    "GroupConfigError",
    "GroupConfigOverrides",
    "altered",
]

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
GROUP_CONFIG_NAMES = (SESSION_TIMEOUT, HEARTBEAT_INTERVAL, SHARE_AUTO_OFFSET_RESET)
TEXT_CONFIGS = {SHARE_AUTO_OFFSET_RESET: ("earliest", "latest")}
"""The group configs whose values are text, with the values Kafka accepts."""

ConfigValue = int | str

OP_SET = 0
OP_DELETE = 1


class GroupConfigError(ValueError):
    """An alteration Kafka refuses; ``unknown`` tells an unknown name from an invalid value."""

    def __init__(self, message: str, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown


@dataclass(slots=True)
class GroupConfigOverrides:
    """Group id → {config name → value}; only names of :data:`GROUP_CONFIG_NAMES`."""

    by_group: dict[str, dict[str, ConfigValue]] = field(default_factory=dict)

    def of(self, group_id: str) -> Mapping[str, ConfigValue]:
        return self.by_group.get(group_id, {})

    def session_timeout_ms(self, group_id: str, default: int) -> int:
        value = self.of(group_id).get(SESSION_TIMEOUT, default)
        return value if isinstance(value, int) else default

    def heartbeat_interval_ms(self, group_id: str, default: int) -> int:
        value = self.of(group_id).get(HEARTBEAT_INTERVAL, default)
        return value if isinstance(value, int) else default

    def share_auto_offset_reset(self, group_id: str) -> str | None:
        """The share group's ``share.auto.offset.reset``; None: not set for it (Kafka's default)."""
        value = self.of(group_id).get(SHARE_AUTO_OFFSET_RESET)
        return value if isinstance(value, str) else None

    def put(self, group_id: str, values: Mapping[str, ConfigValue]) -> None:
        if values:
            self.by_group[group_id] = dict(values)
        else:
            self.by_group.pop(group_id, None)


def stored_value(name: str, raw: object) -> ConfigValue:
    """A value as the group configs document holds it: text for the text configs, else a number."""
    return str(raw) if name in TEXT_CONFIGS else int(str(raw))


def _parse(name: str, value: str | None) -> ConfigValue:
    if name in TEXT_CONFIGS:
        if value not in TEXT_CONFIGS[name]:
            raise GroupConfigError(
                f"Invalid value {value} for configuration {name}: one of {TEXT_CONFIGS[name]}"
            )
        return value
    try:
        number = int(value) if value is not None else 0
    except ValueError:
        raise GroupConfigError(f"Invalid value {value} for configuration {name}") from None
    if number <= 0:
        raise GroupConfigError(f"Invalid value {value} for configuration {name}: must be positive")
    return number


def altered(
    current: Mapping[str, ConfigValue],
    operations: list[tuple[str, int, str | None]],
    defaults: Mapping[str, int],
) -> dict[str, ConfigValue]:
    """The overrides after ``(name, op, value)`` operations (SET 0, DELETE 1), validated.

    As Kafka checks a group's configs: known names only, positive values, and the effective session
    timeout (override or default) must exceed the effective heartbeat interval.
    """
    result = dict(current)
    for name, op, value in operations:
        if name not in GROUP_CONFIG_NAMES:
            raise GroupConfigError(f"Unknown group config name: {name}", unknown=True)
        if op == OP_SET:
            result[name] = _parse(name, value)
        elif op == OP_DELETE:
            result.pop(name, None)
        else:
            raise GroupConfigError(f"Operation {op} is not supported for group config {name}")
    session = int(result.get(SESSION_TIMEOUT, defaults[SESSION_TIMEOUT]))
    heartbeat = int(result.get(HEARTBEAT_INTERVAL, defaults[HEARTBEAT_INTERVAL]))
    if heartbeat >= session:
        raise GroupConfigError(
            f"{HEARTBEAT_INTERVAL} ({heartbeat}) must be lower than {SESSION_TIMEOUT} ({session})"
        )
    return result
