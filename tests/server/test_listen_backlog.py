"""socket.listen.backlog.size reaches the listening socket; a storm of connects is served, none reset."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient, running_app

STORM = 1_000


def _listen_queue_limit(port: int) -> int:
    """The Send-Q column ``ss`` shows for a listening socket: its backlog as the kernel took it."""
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[2])


async def test_backlog_setting_is_the_listening_sockets_backlog(tmp_path: Path) -> None:
    """A listener started with socket.listen.backlog.size=123 listens with a backlog of 123."""
    async with running_app(tmp_path, **{"socket.listen.backlog.size": "123"}) as (_, port):
        assert _listen_queue_limit(port) == 123


async def test_a_storm_of_connects_is_served_without_resets(tmp_path: Path) -> None:
    """A thousand connects at once under the default backlog are all accepted and answered, none reset."""
    async with running_app(tmp_path) as (_, port):
        assert _listen_queue_limit(port) >= STORM
        clients = await asyncio.wait_for(
            asyncio.gather(*(AsyncRawClient.connect(port) for _ in range(STORM))), 60
        )
        try:
            body = {"client_software_name": "storm", "client_software_version": "1"}
            answers = await asyncio.wait_for(
                asyncio.gather(*(c.call(ApiKey.API_VERSIONS, 3, body) for c in clients)), 60
            )
            assert all(a.error_code == ErrorCode.none for a in answers)
        finally:
            await asyncio.gather(*(c.close() for c in clients))
