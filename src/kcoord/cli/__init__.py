"""The ``kcoord`` command (serve, config, groups, ...) and the admin client it talks through."""

from kcoord.cli.main import main

__all__ = ["main"]
