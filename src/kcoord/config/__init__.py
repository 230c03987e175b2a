"""Settings with Kafka's names and defaults, from file, environment and flags."""

from kcoord.config.definitions import DEFINITIONS, Definition, parse_host_port
from kcoord.config.settings import Settings, SettingsError, env_name

__all__ = ["DEFINITIONS", "Definition", "Settings", "SettingsError", "env_name", "parse_host_port"]
