"""A pure hierarchical timing wheel with lazy, keyed deadlines.

Why lazy: a coordinator moves deadlines far more often than they fire (every heartbeat pushes a
session deadline forward). Here a key's *current* deadline lives in ``_deadlines`` and the slot
it sits in is remembered by that slot's fire tick in ``_fire_tick``. Moving a deadline later is
one dictionary store; when the old slot comes up, the wheel reads the current deadline and
re-inserts the key further on. Moving a deadline earlier inserts the key into the earlier slot
(the old entry becomes stale and is dropped when its slot comes up). Cancelling drops the
deadline only; the slot entry is dropped lazily in the same way.

Layout: time is cut into ticks of ``tick_ms``. Level 0 has one slot per tick for the next
``slots`` ticks; each level above has slots ``slots`` times as wide. A key goes to the lowest
level whose window reaches its tick; when the cursor reaches the start of a higher-level slot,
that slot's keys are re-inserted lower down (or fire). A deadline beyond the top level's window
waits in the top level's furthest slot and is re-inserted when that slot comes up. Each level
keeps a bitmap of its non-empty slots, so the next tick with work is found without walking
empty slots, and a clock jump of days costs only the slots that hold keys.

Every valid entry satisfies: fire tick > cursor at level >= 1, and fire tick >= cursor at
level 0 (the cursor's own level-0 slot is the partially elapsed tick).
"""

from __future__ import annotations

__all__ = ["TimingWheel"]


class TimingWheel:
    """Keyed deadlines on a hierarchical wheel; ``advance`` returns the keys that are due."""

    __slots__ = (
        "_bits",
        "_cursor",
        "_deadlines",
        "_fire_tick",
        "_full",
        "_levels",
        "_mask",
        "_occupied",
        "_size",
        "_slots",
        "_tick_ms",
    )

    def __init__(self, *, start_ms: int = 0, tick_ms: int = 10, slot_bits: int = 6, levels: int = 6) -> None:
        """Create an empty wheel whose cursor starts at ``start_ms``.

        The defaults (10 ms ticks, 64 slots per level, 6 levels) reach about 21 years before a
        deadline has to wait in the top level's furthest slot.
        """
        if tick_ms < 1 or slot_bits < 1 or levels < 1:
            raise ValueError("tick_ms, slot_bits and levels must all be positive")
        self._tick_ms = tick_ms
        self._bits = slot_bits
        self._size = 1 << slot_bits
        self._mask = self._size - 1
        self._full = (1 << self._size) - 1
        self._levels = levels
        self._cursor = start_ms // tick_ms
        self._slots: list[list[dict[str, None]]] = [[{} for _ in range(self._size)] for _ in range(levels)]
        self._occupied = [0] * levels
        self._deadlines: dict[str, int] = {}
        self._fire_tick: dict[str, int] = {}

    @property
    def tick_ms(self) -> int:
        """The width of one tick in milliseconds."""
        return self._tick_ms

    def __len__(self) -> int:
        """The number of keys that have a deadline."""
        return len(self._deadlines)

    def __contains__(self, key: object) -> bool:
        return key in self._deadlines

    def deadline(self, key: str) -> int | None:
        """The current deadline of ``key``, or None."""
        return self._deadlines.get(key)

    def schedule(self, key: str, deadline_ms: int) -> None:
        """Set or move the deadline of ``key``; moving it later touches no slot."""
        self._deadlines[key] = deadline_ms
        fire = self._fire_tick.get(key)
        tick = deadline_ms // self._tick_ms
        # max(tick, cursor) < fire, without a call: every heartbeat and commit moves a deadline
        if fire is None or (tick < fire and self._cursor < fire):
            self._place(key, tick)

    def cancel(self, key: str) -> None:
        """Forget ``key``; its slot entry is dropped when that slot comes up."""
        self._deadlines.pop(key, None)

    def advance(self, now_ms: int) -> list[str]:
        """Return every key whose deadline is <= ``now_ms``, each once, earliest deadline first."""
        target = max(now_ms // self._tick_ms, self._cursor)
        expired: list[tuple[int, str]] = []
        while True:
            tick = self._next_busy_tick()
            if tick is None or tick > target:
                break
            self._cursor = tick
            for level in range(self._levels - 1, 0, -1):
                shift = self._bits * level
                if tick & ((1 << shift) - 1) == 0:
                    self._process(level, (tick >> shift) & self._mask, tick, now_ms, expired)
            self._process(0, tick & self._mask, tick, now_ms, expired)
            if tick == target:
                break
        self._cursor = target
        expired.sort(key=_deadline_of)
        return [key for _, key in expired]

    def next_wakeup_ms(self) -> int | None:
        """The earliest time at which ``advance`` can have work, or None when the wheel is empty.

        Never later than the earliest deadline. For a level-0 slot it is that slot's earliest
        deadline, capped at the slot's end (the slot may hold only keys whose deadlines moved
        on, which must be re-inserted then), so a driver can sleep exactly until it.
        """
        best: int | None = None
        first_level0 = self._next_level0_tick()
        if first_level0 is not None:
            slot_end_ms = (first_level0 + 1) * self._tick_ms
            best = slot_end_ms
            for key in self._slots[0][first_level0 & self._mask]:
                if self._fire_tick.get(key) == first_level0:
                    deadline = self._deadlines.get(key)
                    if deadline is not None and deadline < best:
                        best = deadline
        upper = self._next_upper_tick()
        if upper is not None and (best is None or upper * self._tick_ms < best):
            best = upper * self._tick_ms
        return best

    def _place(self, key: str, tick: int) -> None:
        """Insert ``key`` into the slot for ``tick`` (clamped to the cursor) and remember it."""
        cursor = self._cursor
        tick = max(tick, cursor)
        bits, size = self._bits, self._size
        level = 0
        fire = tick
        if tick - cursor >= size:
            for level in range(1, self._levels):
                shift = bits * level
                bucket = tick >> shift
                if bucket - (cursor >> shift) < size:
                    break
            else:
                shift = bits * level
                bucket = (cursor >> shift) + size - 1
            fire = bucket << shift
            index = bucket & self._mask
        else:
            index = tick & self._mask
        self._slots[level][index][key] = None
        self._occupied[level] |= 1 << index
        self._fire_tick[key] = fire

    def _process(
        self, level: int, index: int, tick: int, now_ms: int, expired: list[tuple[int, str]]
    ) -> None:
        """Empty one slot whose fire tick is ``tick``: fire due keys, re-insert the others."""
        if not (self._occupied[level] >> index) & 1:
            return
        entries = self._slots[level][index]
        self._slots[level][index] = {}
        self._occupied[level] &= ~(1 << index)
        fire_tick, deadlines = self._fire_tick, self._deadlines
        for key in entries:
            if fire_tick.get(key) != tick:
                continue
            deadline = deadlines.get(key)
            if deadline is None:
                del fire_tick[key]
            elif deadline <= now_ms:
                del fire_tick[key]
                del deadlines[key]
                expired.append((deadline, key))
            else:
                self._place(key, deadline // self._tick_ms)

    def _next_busy_tick(self) -> int | None:
        """The earliest fire tick of any non-empty slot."""
        low = self._next_level0_tick()
        high = self._next_upper_tick()
        if low is None:
            return high
        if high is None:
            return low
        return min(low, high)

    def _next_level0_tick(self) -> int | None:
        bitmap = self._occupied[0]
        if not bitmap:
            return None
        return self._cursor + _first_set_from(bitmap, self._cursor & self._mask, self._size, self._full)

    def _next_upper_tick(self) -> int | None:
        best: int | None = None
        for level in range(1, self._levels):
            bitmap = self._occupied[level]
            if not bitmap:
                continue
            shift = self._bits * level
            first_bucket = (self._cursor >> shift) + 1
            offset = _first_set_from(bitmap, first_bucket & self._mask, self._size, self._full)
            fire = (first_bucket + offset) << shift
            if best is None or fire < best:
                best = fire
        return best


def _first_set_from(bitmap: int, start: int, size: int, full: int) -> int:
    """Offset from ``start`` of the first set bit of a ``size``-bit ring bitmap (which is non-zero)."""
    rotated = ((bitmap >> start) | (bitmap << (size - start))) & full
    return (rotated & -rotated).bit_length() - 1


def _deadline_of(entry: tuple[int, str]) -> int:
    return entry[0]
