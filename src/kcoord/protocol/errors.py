"""The one exception type that carries a Kafka error code, and Kafka's names for the codes.

The core raises :class:`KafkaError`; one boundary (the request router) turns it into the
error code of the response and logs anything that is not a ``KafkaError``.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "error_name"]


class KafkaError(Exception):
    """A failure that Kafka clients understand: an error code plus an optional message."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"KafkaError({self.code.name}, {self.message!r})"


def error_name(code: int) -> str:
    """The Kafka error name of ``code`` as Kafka spells it (``NONE``, ``REBALANCE_IN_PROGRESS``)."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_{code}"
