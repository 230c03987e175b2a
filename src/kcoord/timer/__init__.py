"""Deadlines for the coordinator: clocks, a pure timing wheel and its asyncio driver."""

from kcoord.timer.api import Clock, Timer
from kcoord.timer.clock import ManualClock, SystemClock
from kcoord.timer.driver import TimerDriver
from kcoord.timer.wheel import TimingWheel

__all__ = ["Clock", "ManualClock", "SystemClock", "Timer", "TimerDriver", "TimingWheel"]
