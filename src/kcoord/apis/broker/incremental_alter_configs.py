"""IncrementalAlterConfigs (key 44), versions 0-1 (v1 flexible), for TOPIC, BROKER and GROUP resources.

Per resource a list of ``(name, operation, value)``; SET (0) and DELETE (1) apply to every
config, APPEND (2) and SUBTRACT (3) to list configs only (topics' ``cleanup.policy``; broker and
group configs have none). What each resource type accepts, and the checks, are those of
:mod:`.config_alteration`, shared with AlterConfigs.
"""

from __future__ import annotations

import functools
from typing import Any

from kcoord.apis.broker.config_alteration import (
    ConfigTargets,
    Operations,
    Step,
    alter_resources,
    resources_error_response,
)
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.registry import ApiSpec
from kcoord.server.context import RequestContext

__all__ = ["api", "handle_incremental_alter_configs"]


def api(targets: ConfigTargets) -> ApiSpec:
    handler = functools.partial(handle_incremental_alter_configs, targets=targets)
    return ApiSpec(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, handler, resources_error_response
    )


async def handle_incremental_alter_configs(
    ctx: RequestContext, request: Any, *, targets: ConfigTargets
) -> dict[str, Any]:
    return await alter_resources(ctx, targets, request, _given)


def _given(resource: Any) -> Operations:
    """The resource's own steps, whatever its current configs."""
    steps: list[Step] = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
    return lambda _current: steps
