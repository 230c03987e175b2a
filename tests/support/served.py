"""What a kcoord node serves: the registry of an App that is built, never started.

Building an App wires every API the way the server does (the composition root is the only place
that registers them), so tests that walk "every advertised API and version" read it from here.
"""

from __future__ import annotations

import functools
import tempfile

from kcoord.app import App
from kcoord.config import Settings
from kcoord.protocol.registry import ApiRegistry, ApiSpec


@functools.cache
def served_registry() -> ApiRegistry:
    """The registry of an App built on a throwaway data directory and a memory store."""
    with tempfile.TemporaryDirectory(prefix="kcoord-served-") as data_dir:
        settings = Settings.load(environ={}, flags={"log.dirs": data_dir})
        return App(settings, store_url="memory://").registry


def served_apis() -> list[ApiSpec]:
    """Every served API in key order."""
    return served_registry().specs()


def served_spec(api_key: int) -> ApiSpec:
    spec = served_registry().get(api_key)
    assert spec is not None, f"api key {api_key} is not served"
    return spec
