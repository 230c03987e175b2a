"""Long work on the event loop yields between slices: a round of auto-created topics is applied while
other tasks run, and the slicer yields only once its budget is spent."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kcoord.cluster.loop_slices import LoopSlices
from tests.apis.broker.topic_app import open_app


async def test_a_slicer_yields_only_once_its_budget_is_spent() -> None:
    """With no budget every pause lets another task run; with an hour's budget none does."""
    ran: list[int] = []

    async def other() -> None:
        while True:
            ran.append(1)
            await asyncio.sleep(0)

    task = asyncio.ensure_future(other())
    await asyncio.sleep(0)
    try:
        for budget_s, expected_yields in ((0.0, 5), (3600.0, 0)):
            slices = LoopSlices(budget_s)
            before = len(ran)
            for _ in range(5):
                await slices.pause()
            assert (slices.yields, len(ran) - before) == (expected_yields, expected_yields)
    finally:
        task.cancel()


async def test_other_tasks_run_while_a_round_of_creations_is_applied(tmp_path: Path) -> None:
    """While 2,000 topics named in one round are installed and announced, a task on the same loop
    runs and sees the view part-way (some of the round's topics installed, not all)."""
    app = await open_app(tmp_path)
    seen: set[int] = set()
    stop = asyncio.Event()

    async def watch() -> None:
        while not stop.is_set():
            seen.add(len(app.topics.names()))
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(watch())
    try:
        found = await app.topics.ensure_many([f"round-{index:04}" for index in range(2000)])
    finally:
        stop.set()
        await watcher
        await app.store.close()
    assert all(info is not None for info in found.values())
    assert any(0 < count < 2000 for count in seen)
