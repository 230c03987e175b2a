"""PeriodicTask: the background pass that retention, producer snapshots and the shared-state poll share."""

from __future__ import annotations

import asyncio

import structlog

from kcoord.timer.periodic import PeriodicTask


async def test_a_failing_pass_is_logged_and_the_next_one_still_runs() -> None:
    """A pass that raises is logged under the owner's event and the loop carries on until stopped."""
    calls = 0
    third = asyncio.Event()

    async def run_pass() -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            third.set()
        if calls == 1:
            raise RuntimeError("first pass fails")

    task = PeriodicTask(run_pass, 0.01, failure_event="test.pass_failed")
    with structlog.testing.capture_logs() as logs:
        task.start()
        task.start()  # a second start does not add a second loop
        await asyncio.wait_for(third.wait(), 5)
        await task.stop()
    assert [entry["event"] for entry in logs] == ["test.pass_failed"]
    stopped_at = calls
    await asyncio.sleep(0.05)
    assert calls == stopped_at


async def test_an_interval_of_zero_never_starts() -> None:
    """A period of 0 (a disabled check) starts no task, and stopping it is a no-op."""
    ran = False

    async def run_pass() -> None:
        nonlocal ran
        ran = True

    task = PeriodicTask(run_pass, 0, failure_event="test.pass_failed")
    task.start()
    await asyncio.sleep(0.02)
    await task.stop()
    assert not ran
