"""Tests of the system and manual clocks."""

from __future__ import annotations

import time

import pytest

from kcoord.timer.api import Clock
from kcoord.timer.clock import ManualClock, SystemClock


def test_system_clock_reads_wall_time_in_ms() -> None:
    """The system clock reports epoch milliseconds close to time.time()."""
    clock: Clock = SystemClock()
    assert abs(clock.now_ms() - time.time() * 1000) < 1_000


def test_system_clock_never_runs_backwards(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wall clock stepping back is held at the last reading."""
    readings = iter([5_000_000_000, 4_000_000_000, 6_000_000_000])
    monkeypatch.setattr(time, "time_ns", lambda: next(readings))
    clock = SystemClock()
    assert [clock.now_ms(), clock.now_ms(), clock.now_ms()] == [5_000, 5_000, 6_000]


def test_manual_clock_moves_only_when_told() -> None:
    """The manual clock starts where it is told, advances and jumps forward, and refuses to go back."""
    clock = ManualClock(100)
    assert clock.now_ms() == 100
    assert clock.advance(50) == 150
    assert clock.set(1_000) == 1_000
    assert clock.now_ms() == 1_000
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.set(999)
