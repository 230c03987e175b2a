"""Kafka's per-connection order: one request at a time on a connection, never holding another one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient, connected, decode_response, encode_request, running_app
from tests.protocol.request_samples import (
    Scene,
    commit_sample,
    create_topic,
    fetch_sample,
    join_sample,
    offset_fetch_sample,
    produce_sample,
)
from tests.support.batches import read_batches

PAIRS = 20
JOIN_DELAY_S = 1.5

Request = tuple[int, int, dict[str, object]]


async def send_together(client: AsyncRawClient, requests: list[Request]) -> list[int]:
    """Write every request in one buffer, before reading anything; returns their correlation ids."""
    ids = [client.next_correlation_id() for _ in requests]
    frames = b"".join(
        encode_request(key, version, body, cid, client.client_id)
        for (key, version, body), cid in zip(requests, ids, strict=True)
    )
    await client.send_frame(frames)
    return ids


async def test_pipelined_commit_then_fetch_reads_the_commit(tmp_path: Path) -> None:
    """Each OffsetFetch pipelined right behind an OffsetCommit on one connection returns that commit."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        scene = Scene(client, 0, port, app.node.node_id, topic="ordered", group="ordered-group")
        await create_topic(scene)
        requests: list[Request] = []
        for offset in range(1, PAIRS + 1):
            requests.append((ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset=offset * 10)))
            requests.append((ApiKey.OFFSET_FETCH, 8, offset_fetch_sample(scene)))
        ids = await send_together(client, requests)
        for pair in range(PAIRS):
            committed = await client.recv(ApiKey.OFFSET_COMMIT, 8, ids[2 * pair])
            assert committed.topics[0].partitions[0].error_code == ErrorCode.none
            fetched = await client.recv(ApiKey.OFFSET_FETCH, 8, ids[2 * pair + 1])
            assert fetched.groups[0].topics[0].partitions[0].committed_offset == (pair + 1) * 10


async def test_pipelined_produce_then_fetch_returns_the_records(tmp_path: Path) -> None:
    """Each Fetch pipelined right behind a Produce on one connection returns the batch just produced."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        scene = Scene(client, 0, port, app.node.node_id, topic="ordered-data")
        await create_topic(scene)
        requests: list[Request] = []
        for offset in range(PAIRS):
            requests.append((ApiKey.PRODUCE, 7, produce_sample(scene)))
            fetch = fetch_sample(scene)
            fetch["topics"][0]["partitions"][0]["fetch_offset"] = offset
            requests.append((ApiKey.FETCH, 11, fetch))
        ids = await send_together(client, requests)
        for offset in range(PAIRS):
            produced = await client.recv(ApiKey.PRODUCE, 7, ids[2 * offset])
            answer = produced.responses[0].partition_responses[0]
            assert (answer.error_code, answer.base_offset) == (ErrorCode.none, offset)
            fetched = await client.recv(ApiKey.FETCH, 11, ids[2 * offset + 1])
            partition = fetched.responses[0].partitions[0]
            batches = list(read_batches(bytes(partition.records or b"")))
            assert [b.base_offset for b in batches][:1] == [offset]
            assert [r.value for r in list(batches[0].records)] == [b"value"]


async def test_parked_join_holds_its_own_connection_only(tmp_path: Path) -> None:
    """A JoinGroup parked for the initial delay holds back its connection's next request, and no other's."""
    delay_s = JOIN_DELAY_S
    async with (
        running_app(tmp_path, **{"group.initial.rebalance.delay.ms": "1500"}) as (app, port),
        connected(port) as parked,
        connected(port) as bystander,
    ):
        scene = Scene(parked, 0, port, app.node.node_id, topic="parked-topic", group="parked-group")
        first = await parked.call(ApiKey.JOIN_GROUP, 5, join_sample(scene))
        assert first.error_code == ErrorCode.member_id_required
        scene.member_id = first.member_id
        started = time.monotonic()
        join_id, behind_id = await send_together(
            parked, [(ApiKey.JOIN_GROUP, 5, join_sample(scene)), (ApiKey.API_VERSIONS, 3, _api_versions())]
        )
        for _ in range(20):
            answered = await bystander.call(ApiKey.API_VERSIONS, 3, _api_versions(), within_s=0.5)
            assert answered.error_code == ErrorCode.none
        other = Scene(bystander, 0, port, app.node.node_id, topic="parked-topic", group="bystander-group")
        await create_topic(other)
        committed = await bystander.call(ApiKey.OFFSET_COMMIT, 8, commit_sample(other), within_s=0.5)
        assert committed.topics[0].partitions[0].error_code == ErrorCode.none
        assert time.monotonic() - started < delay_s / 2, "the bystander waited for the parked join"
        with_nothing_yet = asyncio.ensure_future(parked.recv_frame(within_s=delay_s * 4))
        await asyncio.sleep(0.2)
        assert not with_nothing_yet.done(), "the parked connection answered before its JoinGroup did"
        joined = decode_response(ApiKey.JOIN_GROUP, 5, await with_nothing_yet, join_id)
        assert joined.error_code == ErrorCode.none
        assert time.monotonic() - started >= delay_s * 0.9
        behind = await parked.recv(ApiKey.API_VERSIONS, 3, behind_id)
        assert behind.error_code == ErrorCode.none


def _api_versions() -> dict[str, object]:
    return {"client_software_name": "kcoord-tests", "client_software_version": "1.0"}
