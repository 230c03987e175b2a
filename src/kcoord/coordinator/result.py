"""What a coordinator handler returns: records to append, then responses to release.

The core never does I/O. A handler is given the request, an opaque *sink* that stands for
the waiting client, and the time; it returns a :class:`CoordinatorResult`. The shell appends
``records`` to the offsets log and only when they are durable hands each ``(sink, response)``
pair back to its connection (answer after durability). A parked request (a JoinGroup waiting
for the other members) simply does not appear in the result; it appears in the result of
whatever later event completes it: another member's request or a timer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Self

from kcoord.coordinator.records import CoordinatorRecord


@dataclass(slots=True)
class CoordinatorResult:
    """Records to append (in order) and the responses they unblock."""

    records: list[CoordinatorRecord] = field(default_factory=list)
    responses: list[tuple[Any, Any]] = field(default_factory=list)

    @classmethod
    def of_records(cls, records: Iterable[Any]) -> Self:
        """A result carrying ``records``, of whichever coordinator (groups, share state, transactions)."""
        result = cls()
        held: list[Any] = result.records
        held.extend(records)
        return result

    def respond(self, sink: Any, response: Any) -> None:
        self.responses.append((sink, response))

    def extend(self, other: CoordinatorResult) -> None:
        """Append ``other``'s records and responses after this result's own."""
        self.records.extend(other.records)
        self.responses.extend(other.responses)
