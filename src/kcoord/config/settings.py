"""The one settings object: defaults < TOML file < environment (``KCOORD_...``) < flags.

Every value remembers where it came from, so ``kcoord config show`` can say why a setting
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


class Settings:
    """Effective settings; read with ``settings["num.partitions"]``."""

    def __init__(self, values: Mapping[str, Value]) -> None:
        self._values = dict(values)
        self.unknown_environment: tuple[str, ...] = ()
        """``KCOORD_`` variables that name no setting: ignored, and warned about at start."""

    def __getitem__(self, name: str) -> Any:
        return self._values[name].value

    def source(self, name: str) -> str:
        return self._values[name].source

    def items(self) -> Iterable[tuple[str, Value]]:
        return sorted(self._values.items())

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
        unknown_env: list[str] = []
        values = {
            d.name: Value(d.parse(d.default) if d.default is not None else None, "default")
            for d in DEFINITIONS
        }
        if config_file is not None:
            for name, raw in _read_toml(Path(config_file)).items():
                values[name] = Value(_parse(name, raw, f"file {config_file}"), f"file {config_file}")
        for key, raw in (os.environ if environ is None else environ).items():
            if not key.startswith(ENV_PREFIX) or key in ("KCOORD_CONFIG",):
                continue
            env_setting = _ENV_TO_NAME.get(key)
            if env_setting is None:
                unknown_env.append(key)
                continue
            values[env_setting] = Value(_parse(env_setting, raw, f"env {key}"), f"env {key}")
        for name, raw in (flags or {}).items():
            values[name] = Value(_parse(name, raw, "flag"), "flag")
        settings = cls(values)
        settings.unknown_environment = tuple(sorted(unknown_env))
        return settings


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
