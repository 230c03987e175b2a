"""The errors a topic catalogue change answers, worded once for the file and the shared catalogue
(and the topic manager's own checks of its view)."""

from __future__ import annotations

from enum import Enum

from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = ["CatalogueError"]


class CatalogueError(Enum):
    """Call one with the topic's name (and, for NOT_GROWING, the current and requested partition
    counts) for its ``KafkaError``."""

    ALREADY_EXISTS = (ErrorCode.topic_already_exists, "Topic '{0}' already exists.")
    UNKNOWN = (ErrorCode.unknown_topic_or_partition, "Topic '{0}' does not exist.")
    INTERNAL_DELETE = (ErrorCode.invalid_request, "Internal topic '{0}' cannot be deleted.")
    INTERNAL_CONFIGS = (ErrorCode.invalid_request, "kcoord manages internal topic '{0}''s configs.")
    NOT_GROWING = (
        ErrorCode.invalid_partitions,
        "Topic currently has {1} partitions, which is higher than or equal to the requested {2}.",
    )

    def __call__(self, name: str, *counts: int) -> KafkaError:
        code, text = self.value
        return KafkaError(code, text.format(name, *counts))
