"""A request the connection started by hand and that suspended is awaited as ``await`` would await it."""

from __future__ import annotations

import asyncio

import pytest

from kcoord.server.connection import _Resumed


async def _drive(coroutine: object) -> bytes | None:
    """What the connection does: start the coroutine, and await the rest only if it yielded."""
    try:
        yielded = coroutine.send(None)  # type: ignore[attr-defined]
    except StopIteration as answered:
        return answered.value  # type: ignore[no-any-return]
    return await _Resumed(coroutine, yielded)  # type: ignore[arg-type]


async def test_results_and_errors_pass_through_every_kind_of_wait() -> None:
    """Futures, bare yields (sleep(0)) and timers are waited for; the result or error comes back."""
    loop = asyncio.get_running_loop()
    later: asyncio.Future[bytes] = loop.create_future()
    loop.call_later(0.01, later.set_result, b"late")

    async def waits() -> bytes | None:
        await asyncio.sleep(0)
        value = await later
        await asyncio.sleep(0.001)
        return value + b"!"

    async def fails() -> bytes | None:
        await asyncio.sleep(0)
        raise ValueError("bad")

    async def at_once() -> bytes | None:
        return b"now"

    assert await _drive(waits()) == b"late!"
    assert await _drive(at_once()) == b"now"
    with pytest.raises(ValueError, match="bad"):
        await _drive(fails())


async def test_a_cancellation_reaches_the_request_itself() -> None:
    """Cancelling the connection's task throws into the waiting request, which may clean up."""
    cleaned: list[str] = []
    started = asyncio.Event()

    async def parked() -> bytes | None:
        try:
            started.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cleaned.append("cancelled")
            raise
        return None

    task = asyncio.create_task(_drive(parked()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["cancelled"]
