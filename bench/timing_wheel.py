"""Deadline extensions: kcoord's TimingWheel against asyncio's ``call_later`` + ``handle.cancel()``.

A heartbeat moves its member's session deadline later. With asyncio timers that is a cancel plus
a new TimerHandle pushed onto the loop's heap (the cancelled one stays there until it surfaces);
with the wheel it is one dictionary store, since the key keeps the slot it already has. Each run
extends N deadlines spread round-robin over K keys (K=1: one member heartbeating N times;
K=10,000: many members, as on a busy coordinator), first with the wheel, then with call_later, in
the same process and run, and reports ns per extension and the ratio call_later/wheel. The loop
yields every 1,000 extensions (so asyncio can purge cancelled handles, as in a live server) but
no timer comes due; only the cost of moving deadlines is measured. ``TimerDriver.schedule`` (the
wheel behind the coordinator's Timer interface, started) is measured as well.

Adapted from the timing-wheel engineer's draft (helpers/wheel_bench.py).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop

from kcoord.runtime.timer_driver import TimerDriver
from kcoord.timer.wheel import TimingWheel
from report import Measurement
from server import BenchServer

DESCRIPTION = "1,000,000 session-deadline extensions: TimingWheel vs loop.call_later + cancel (in-process)"
SESSION_MS = 45_000
YIELD_EVERY = 1_000
"""Extensions between yields to the loop: a running loop purges cancelled asyncio handles from its
heap (once they are over half of it), as it would in a server where heartbeats arrive between
other work; without yielding, the heap would grow to N entries and flatter the wheel."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("timing_wheel")
    group.add_argument(
        "--timing-wheel-extensions", type=int, default=1_000_000, help="extensions per run (default 1000000)"
    )
    group.add_argument(
        "--timing-wheel-keys",
        type=int,
        nargs="+",
        default=[1, 10_000],
        help="distinct keys the extensions cycle over (default: 1 10000)",
    )


def _noop() -> None:
    return None


class _FrozenClock:
    """Time stands still at 0, so the started driver sleeps towards the earliest deadline."""

    def now_ms(self) -> int:
        return 0


async def _extend(n: int, keys: list[str], schedule: Callable[[str, int], None]) -> float:
    """Seconds to move ``n`` deadlines later through ``schedule``, yielding to the loop regularly."""
    count = len(keys)
    gc.collect()
    started = time.perf_counter()
    for i in range(n):
        schedule(keys[i % count], SESSION_MS + 1 + i)
        if i % YIELD_EVERY == 0:
            await asyncio.sleep(0)
    return time.perf_counter() - started


async def extend_with_wheel(n: int, keys: list[str]) -> float:
    """The bare wheel, already holding every key."""
    wheel = TimingWheel(start_ms=0)
    for key in keys:
        wheel.schedule(key, SESSION_MS)
    return await _extend(n, keys, wheel.schedule)


async def extend_with_driver(n: int, keys: list[str]) -> float:
    """What the coordinator calls: a started TimerDriver (the wheel plus the re-arm check)."""
    driver = TimerDriver(TimingWheel(start_ms=0), _FrozenClock(), lambda _keys: None)
    for key in keys:
        driver.schedule(key, SESSION_MS)
    driver.start()
    await asyncio.sleep(0)
    try:
        return await _extend(n, keys, driver.schedule)
    finally:
        await driver.stop()


async def extend_with_call_later(n: int, keys: list[str]) -> float:
    """One live asyncio handle per key, cancelled and re-created for every extension."""
    loop = asyncio.get_running_loop()
    handles = {key: loop.call_later(SESSION_MS / 1000, _noop) for key in keys}

    def schedule(key: str, deadline_ms: int) -> None:
        handles[key].cancel()
        handles[key] = loop.call_later(deadline_ms / 1000, _noop)

    try:
        return await _extend(n, keys, schedule)
    finally:
        for handle in handles.values():
            handle.cancel()


_CANDIDATES: dict[str, tuple[str, Callable[[int, list[str]], Coroutine[Any, Any, float]]]] = {
    "wheel.schedule": ("uvloop", extend_with_wheel),
    "TimerDriver.schedule": ("uvloop", extend_with_driver),
    "call_later+cancel (uvloop)": ("uvloop", extend_with_call_later),
    "call_later+cancel (asyncio)": ("asyncio", extend_with_call_later),
}
"""Figure name -> (event loop, measurement). kcoord serves on uvloop, so uvloop's timers are the
comparison that matters; the stock asyncio loop is shown as well."""


def _run_on(loop_kind: str, coroutine: Coroutine[Any, Any, float]) -> float:
    if loop_kind == "uvloop":
        return float(uvloop.run(coroutine))
    return asyncio.run(coroutine)


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    del server  # in-process: the section's server is not used
    n = options.timing_wheel_extensions
    measurements: list[Measurement] = []
    for count in options.timing_wheel_keys:
        keys = [f"classic:session:7:group-{i % 97}:member-{i}" for i in range(count)]
        figures: dict[str, list[float]] = {name: [] for name in _CANDIDATES}
        for run_number in range(options.runs):
            for name, (loop_kind, extend) in _CANDIDATES.items():
                figures[name].append(_run_on(loop_kind, extend(n, keys)) / n * 1e9)
            summary = ", ".join(f"{name} {values[-1]:.0f} ns" for name, values in figures.items())
            print(f"  keys={count} run {run_number + 1}: {summary}", flush=True)
        measurements += [
            Measurement(f"{name}, {count} keys", "ns/extension", tuple(values))
            for name, values in figures.items()
        ]
        wheel = figures["wheel.schedule"]
        for name in ("call_later+cancel (uvloop)", "call_later+cancel (asyncio)"):
            measurements.append(
                Measurement(
                    f"{name} / wheel, {count} keys (target >= 3)",
                    "ratio",
                    tuple(c / w for c, w in zip(figures[name], wheel, strict=True)),
                )
            )
    return measurements
