"""AlterConfigs (key 33), versions 0-2, for TOPIC, BROKER and GROUP resources.

- v0: per resource (type, name) the whole new set of its configs ``(name, value)``; configs not
  given go back to their defaults (Kafka's "replace" semantics), and ``validate_only``.
- v1: no change (the response's throttle time is honoured).  v2: flexible.

Kafka deprecated it for IncrementalAlterConfigs but clients still send it (librdkafka's
``AlterConfigs``, kafka-python's ``alter_configs``). The new set is turned into
IncrementalAlterConfigs' steps (:func:`.config_alteration.replacement`), so both APIs check, store
and apply a resource the same way; see :mod:`.config_alteration` for each resource type.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.broker.config_alteration import Operations, alteration_api, replacement
from kcoord.protocol.api_keys import ApiKey

__all__ = ["api"]


def _replacement(resource: Any) -> Operations:
    """The resource's whole new set, replacing its current configs."""
    return replacement([(c.name, c.value) for c in resource.configs])


api = alteration_api(ApiKey.ALTER_CONFIGS, "AlterConfigs", 2, _replacement)
