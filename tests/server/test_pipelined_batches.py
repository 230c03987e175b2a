"""Pipelined requests share one round: one write for the batch, strictly in order, never held back."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.app import App
from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient, connected, decode_response, encode_request, running_app
from tests.protocol.request_samples import Scene, join_sample

PIPELINED = 8


def _api_versions() -> dict[str, object]:
    return {"client_software_name": "kcoord-tests", "client_software_version": "1.0"}


Request = tuple[int, int, dict[str, Any]]


async def _send_together(client: AsyncRawClient, requests: list[Request]) -> list[int]:
    ids = [client.next_correlation_id() for _ in requests]
    await client.send_frame(
        b"".join(
            encode_request(key, version, body, cid, client.client_id)
            for (key, version, body), cid in zip(requests, ids, strict=True)
        )
    )
    return ids


def _count_writes(app: App) -> list[int]:
    """Wraps the one open server-side connection's transport.write; returns the list it appends sizes to."""
    (listener,) = app.listener.listeners
    (connection,) = listener._connections.values()
    transport = connection._writer.transport
    sizes: list[int] = []
    write = transport.write

    def counting_write(data: Any) -> None:
        sizes.append(len(data))
        write(data)

    transport.write = counting_write  # type: ignore[method-assign]
    return sizes


async def test_pipelined_requests_are_answered_in_order_with_one_write(tmp_path: Path) -> None:
    """Eight ApiVersions sent in one buffer are answered in order, all eight in a single transport write."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await client.call(ApiKey.API_VERSIONS, 3, _api_versions())
        sizes = _count_writes(app)
        ids = await _send_together(client, [(ApiKey.API_VERSIONS, 3, _api_versions())] * PIPELINED)
        for correlation_id in ids:
            answer = await client.recv(ApiKey.API_VERSIONS, 3, correlation_id)
            assert answer.error_code == ErrorCode.none
        assert len(sizes) == 1, f"{len(sizes)} writes for {PIPELINED} pipelined answers"


async def test_an_answer_ahead_of_a_parked_join_is_not_held_back(tmp_path: Path) -> None:
    """An ApiVersions pipelined just before a JoinGroup parked for 1.5 s is answered at once, not with it."""
    async with (
        running_app(tmp_path, **{"group.initial.rebalance.delay.ms": "1500"}) as (app, port),
        connected(port) as client,
    ):
        scene = Scene(client, 0, port, app.node.node_id, topic="batch-topic", group="batch-group")
        first = await client.call(ApiKey.JOIN_GROUP, 5, join_sample(scene))
        assert first.error_code == ErrorCode.member_id_required
        scene.member_id = first.member_id
        started = time.monotonic()
        versions_id, join_id = await _send_together(
            client, [(ApiKey.API_VERSIONS, 3, _api_versions()), (ApiKey.JOIN_GROUP, 5, join_sample(scene))]
        )
        ahead = await client.recv(ApiKey.API_VERSIONS, 3, versions_id, within_s=0.5)
        assert ahead.error_code == ErrorCode.none
        assert time.monotonic() - started < 0.5
        joined = decode_response(ApiKey.JOIN_GROUP, 5, await client.recv_frame(within_s=6), join_id)
        assert joined.error_code == ErrorCode.none
        assert time.monotonic() - started >= 1.3
