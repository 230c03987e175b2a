"""What an engine's log queues for its writer: a batch to write, a segment roll.

Shared by the engines that hand appends to a writer (file, postgresql): each adds its own
operations (the file engine a flush) to these two.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from kcoord.storage.segment import Placement, Segment


@dataclass(slots=True)
class QueuedWrite:
    """A batch to write at ``placement`` of ``segment``; ``done`` resolves once it is visible."""

    segment: Segment
    data: bytes
    placement: Placement
    done: asyncio.Future[None]
    started: float = 0.0
    """``time.perf_counter()`` when queued, for engines that time appends themselves (0: untimed)."""
    on_written: Callable[[asyncio.Future[None]], None] | None = None
    """Called with ``done`` once it is done, by engines that call it themselves (no loop callback)."""


@dataclass(slots=True)
class QueuedRoll:
    """``old`` is sealed (with its last time-index entry) and ``new`` becomes the active segment."""

    old: Segment
    new: Segment
    seal_entry: tuple[int, int] | None
