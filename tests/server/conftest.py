"""Protocol tests over real sockets share one kcoord server per module where they can."""

from tests.support.module_server import shared_kcoord, topic_name

__all__ = ["shared_kcoord", "topic_name"]
