"""The one settings object: defaults < TOML file < environment (``KCOORD_...``) < flags, and above
them, on a running server, the dynamic broker configs (:mod:`kcoord.config.dynamic`).

A ``KCOORD_`` variable that names no setting is as fatal as a misspelt flag, except the few that
are not settings (:data:`NOT_SETTINGS`, :data:`NOT_SETTINGS_PREFIXES`). Every value remembers
where it came from, so ``kcoord config show`` can say why a setting
has the value it has, and a bad value stops the start with a message naming the key.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcoord.config.definitions import BY_NAME, DEFINITIONS

ENV_PREFIX = "KCOORD_"
DYNAMIC_SOURCE = "dynamic broker config"
DYNAMIC_DEFAULT_SOURCE = "dynamic default broker config"


class SettingsError(ValueError):
    """A setting is unknown or its value does not parse; the message names the key."""


@dataclass(frozen=True, slots=True)
class Value:
    value: Any
    source: str


def env_name(name: str) -> str:
    """``group.max.size`` -> ``KCOORD_GROUP_MAX_SIZE``."""
    return ENV_PREFIX + name.upper().replace(".", "_").replace("-", "_")


_ENV_TO_NAME = {env_name(d.name): d.name for d in DEFINITIONS}

NOT_SETTINGS = frozenset({"KCOORD_CONFIG", "KCOORD_KP2_PYTHON", "KCOORD_TOOLS_VENV", "KCOORD_BASE_IMAGE"})
"""``KCOORD_`` variables that are not settings: the config file (``KCOORD_CONFIG``), the test tools'
(``scripts/test.sh``) and the compose file's base image."""

NOT_SETTINGS_PREFIXES = ("KCOORD_CLIENT_", "KCOORD_TEST_")
"""Prefixes of variables that are not the server's settings: the client commands' own and the test
suite's. Any other ``KCOORD_`` variable must name a setting, or the start fails (exit 2)."""


def _is_setting_variable(key: str) -> bool:
    return (
        key.startswith(ENV_PREFIX) and key not in NOT_SETTINGS and not key.startswith(NOT_SETTINGS_PREFIXES)
    )


def _unknown_variable(key: str) -> SettingsError:
    close = difflib.get_close_matches(key, _ENV_TO_NAME, n=3, cutoff=0.8)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return SettingsError(f"{key}: no such setting (environment variable){hint}")


class Settings:
    """Effective settings; read with ``settings["num.partitions"]``."""

    def __init__(self, values: Mapping[str, Value]) -> None:
        self._values = dict(values)
        self._static = dict(values)

    def __getitem__(self, name: str) -> Any:
        return self._values[name].value

    def source(self, name: str) -> str:
        return self._values[name].source

    def items(self) -> Iterable[tuple[str, Value]]:
        return sorted(self._values.items())

    def apply_dynamic(self, cluster_default: Mapping[str, str], own: Mapping[str, str]) -> list[str]:
        """Put the dynamic broker configs (this node's over the cluster default) over the static
        values, in place; a name no longer set goes back to its static value. Returns the names whose
        value changed."""
        changed: list[str] = []
        for name, static in self._static.items():
            layered = static
            for layer, source in ((cluster_default, DYNAMIC_DEFAULT_SOURCE), (own, DYNAMIC_SOURCE)):
                if name in layer:
                    layered = Value(_parse(name, layer[name], source), source)
            if layered.value != self._values[name].value:
                changed.append(name)
            self._values[name] = layered
        return changed

    def with_overrides(self, overrides: Mapping[str, Any], source: str = "override") -> Settings:
        values = dict(self._values)
        for name, raw in overrides.items():
            values[name] = Value(_parse(name, raw, source), source)
        return Settings(values)

    @classmethod
    def load(
        cls,
        *,
        config_file: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
        flags: Mapping[str, Any] | None = None,
    ) -> Settings:
        """Layer defaults, the file, the environment and the flags, validating each value."""
        values = {
            d.name: Value(d.parse(d.default) if d.default is not None else None, "default")
            for d in DEFINITIONS
        }
        if config_file is not None:
            for name, raw in _read_toml(Path(config_file)).items():
                values[name] = Value(_parse(name, raw, f"file {config_file}"), f"file {config_file}")
        for key, raw in sorted((os.environ if environ is None else environ).items()):
            if not _is_setting_variable(key):
                continue
            env_setting = _ENV_TO_NAME.get(key)
            if env_setting is None:
                raise _unknown_variable(key)
            values[env_setting] = Value(_parse(env_setting, raw, f"env {key}"), f"env {key}")
        for name, raw in (flags or {}).items():
            values[name] = Value(_parse(name, raw, "flag"), "flag")
        return cls(values)


def _parse(name: str, raw: Any, source: str) -> Any:
    definition = BY_NAME.get(name)
    if definition is None:
        close = difflib.get_close_matches(name, BY_NAME, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise SettingsError(f"{name}: no such setting ({source}){hint}")
    try:
        return definition.parse(raw)
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{name}: bad value {raw!r} ({source}): {exc}") from exc


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            document = tomllib.load(fh)
    except OSError as exc:
        raise SettingsError(f"config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path}: {exc}") from exc
    return _flatten(document)


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML dotted keys (``num.partitions = 3``) arrive as nested tables; join them back."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat
