"""Deadlines for the coordinator: clocks and a pure timing wheel (its asyncio driver is in kcoord.runtime)."""

from kcoord.timer.api import Clock, Timer
from kcoord.timer.clock import ManualClock, SystemClock
from kcoord.timer.wheel import TimingWheel

__all__ = ["Clock", "ManualClock", "SystemClock", "Timer", "TimingWheel"]
