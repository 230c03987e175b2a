"""The registry's record of which APIs a connection may pipeline as writes."""

from __future__ import annotations

import dataclasses

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.registry import ApiRegistry
from kcoord.server.router import Router
from tests.support.served import served_apis


def test_pipelined_keys_follow_the_specs_as_they_are_added() -> None:
    """The pipelined keys are exactly the keys of the pipelined specs added so far, and the router
    hands every connection that same set."""
    registry = ApiRegistry()
    router = Router(registry)
    assert registry.pipelined_keys == frozenset()
    for spec in served_apis():
        registry.add(spec)
    expected = frozenset(spec.key for spec in registry.specs() if spec.pipelined)
    assert ApiKey.OFFSET_COMMIT in expected
    assert registry.pipelined_keys == expected
    assert router.pipelined_writes is registry.pipelined_keys


def test_a_spec_added_as_pipelined_joins_the_keys() -> None:
    """Adding a pipelined spec adds its key, and a spec that is not pipelined adds none."""
    specs = {spec.key: spec for spec in served_apis()}
    heartbeat = dataclasses.replace(specs[ApiKey.HEARTBEAT], pipelined=True)
    fetch = dataclasses.replace(specs[ApiKey.FETCH], pipelined=False)
    registry = ApiRegistry([fetch, heartbeat])
    assert registry.pipelined_keys == frozenset({ApiKey.HEARTBEAT})
