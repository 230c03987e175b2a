"""IncrementalAlterConfigs (key 44), versions 0-1 (v1 flexible), for TOPIC, BROKER and GROUP resources.

Per resource a list of ``(name, operation, value)``; SET (0) and DELETE (1) apply to every
config, APPEND (2) and SUBTRACT (3) to list configs only (topics' ``cleanup.policy``; broker and
group configs have none). What each resource type accepts, and the checks, are those of
:mod:`.config_alteration`, shared with AlterConfigs.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.broker.config_alteration import Operations, Step, alteration_api
from kcoord.protocol.api_keys import ApiKey

__all__ = ["api"]


def _given(resource: Any) -> Operations:
    """The resource's own steps, whatever its current configs."""
    steps: list[Step] = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
    return lambda _current: steps


api = alteration_api(ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 1, _given)
