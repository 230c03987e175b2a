"""One kcoord server per test module: the real-client scenarios share it, each on its own topic."""

from tests.support.module_server import shared_kcoord, topic_name

__all__ = ["shared_kcoord", "topic_name"]
