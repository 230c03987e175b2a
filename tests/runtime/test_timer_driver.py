"""Tests of the asyncio timer driver on a real event loop (short deadlines, loose timing asserts)."""

from __future__ import annotations

import asyncio

from kcoord.runtime.timer_driver import TimerDriver
from kcoord.timer.api import Timer
from kcoord.timer.clock import ManualClock, SystemClock
from kcoord.timer.wheel import TimingWheel


class _Recorder:
    """Collects expired keys with the time they were reported and wakes waiters."""

    def __init__(self, clock: SystemClock | ManualClock) -> None:
        self.clock = clock
        self.fired: list[tuple[str, int]] = []
        self.changed = asyncio.Event()

    def __call__(self, keys: list[str]) -> None:
        now = self.clock.now_ms()
        self.fired.extend((key, now) for key in keys)
        self.changed.set()

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(2.0):
            while len(self.fired) < count:
                self.changed.clear()
                await self.changed.wait()


class _CountingWheel(TimingWheel):
    """A wheel that counts calls to advance, to show the driver is not polling."""

    __slots__ = ("advances",)

    def __init__(self, start_ms: int) -> None:
        super().__init__(start_ms=start_ms)
        self.advances = 0

    def advance(self, now_ms: int) -> list[str]:
        self.advances += 1
        return super().advance(now_ms)


def _driver(clock: SystemClock | ManualClock, recorder: _Recorder) -> TimerDriver:
    return TimerDriver(TimingWheel(start_ms=clock.now_ms()), clock, recorder)


async def test_driver_fires_keys_at_their_deadlines() -> None:
    """Keys scheduled tens of ms ahead are reported after their deadline, in deadline order."""
    clock = SystemClock()
    recorder = _Recorder(clock)
    driver = _driver(clock, recorder)
    timer: Timer = driver
    driver.start()
    try:
        start = clock.now_ms()
        timer.schedule("b", start + 60)
        timer.schedule("a", start + 30)
        await recorder.wait_for(2)
        assert [key for key, _ in recorder.fired] == ["a", "b"]
        assert recorder.fired[0][1] >= start + 30
        assert recorder.fired[1][1] >= start + 60
        assert recorder.fired[1][1] < start + 1_000
    finally:
        await driver.stop()


async def test_driver_rearms_for_an_earlier_deadline() -> None:
    """While sleeping towards a far deadline, a new earlier one still fires promptly."""
    clock = SystemClock()
    recorder = _Recorder(clock)
    driver = _driver(clock, recorder)
    driver.start()
    try:
        start = clock.now_ms()
        driver.schedule("far", start + 60_000)
        await asyncio.sleep(0.01)
        driver.schedule("near", start + 40)
        await recorder.wait_for(1)
        assert recorder.fired[0][0] == "near"
        assert driver.deadline("far") == start + 60_000
    finally:
        await driver.stop()


async def test_moved_and_cancelled_deadlines_on_a_real_loop() -> None:
    """A deadline moved later fires at the new time and a cancelled one never fires."""
    clock = SystemClock()
    recorder = _Recorder(clock)
    driver = _driver(clock, recorder)
    driver.start()
    try:
        start = clock.now_ms()
        driver.schedule("moved", start + 20)
        driver.schedule("cancelled", start + 20)
        driver.schedule("moved", start + 80)
        driver.cancel("cancelled")
        await recorder.wait_for(1)
        await asyncio.sleep(0.05)
        assert [key for key, _ in recorder.fired] == ["moved"]
        assert recorder.fired[0][1] >= start + 80
    finally:
        await driver.stop()


async def test_idle_driver_sleeps_until_scheduled() -> None:
    """An empty driver, or one with only a far deadline, waits without polling the wheel."""
    clock = ManualClock(1_000)
    recorder = _Recorder(clock)
    wheel = _CountingWheel(start_ms=clock.now_ms())
    driver = TimerDriver(wheel, clock, recorder)
    driver.start()
    try:
        await asyncio.sleep(0.03)
        assert recorder.fired == []
        assert wheel.advances == 1
        driver.schedule("far", 60_000)
        await asyncio.sleep(0.03)
        assert wheel.advances == 2
        clock.advance(500)
        driver.schedule("due", 1_200)
        await recorder.wait_for(1)
        assert recorder.fired == [("due", 1_500)]
    finally:
        await driver.stop()


async def test_failing_callback_does_not_stop_the_driver() -> None:
    """An exception from on_expired is logged and later keys still fire."""
    clock = SystemClock()
    fired: list[str] = []
    done = asyncio.Event()

    def on_expired(keys: list[str]) -> None:
        fired.extend(keys)
        if "boom" in keys:
            raise RuntimeError("callback failed")
        done.set()

    driver = TimerDriver(TimingWheel(start_ms=clock.now_ms()), clock, on_expired)
    driver.start()
    try:
        driver.schedule("boom", clock.now_ms() + 10)
        driver.schedule("after", clock.now_ms() + 40)
        async with asyncio.timeout(2):
            await done.wait()
        assert fired == ["boom", "after"]
        assert driver.running
    finally:
        await driver.stop()
    assert not driver.running


async def test_stop_is_idempotent_and_keeps_deadlines() -> None:
    """Stopping twice is harmless and the wheel still remembers pending deadlines."""
    clock = SystemClock()
    driver = TimerDriver.for_clock(clock, lambda keys: None)
    driver.start()
    driver.schedule("k", clock.now_ms() + 60_000)
    await driver.stop()
    await driver.stop()
    assert driver.deadline("k") is not None
