"""OffsetCommits pipelined on one connection join one fsync round, and are still answered in order."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kcoord.app import App
from kcoord.protocol.api_keys import ApiKey
from kcoord.server.connection import MAX_PIPELINED_WRITES
from kcoord.storage.api import AppendResult, PartitionLog
from tests.protocol.in_process import AsyncRawClient, connected, encode_request, running_app
from tests.protocol.request_samples import Scene, commit_sample, create_topic, offset_fetch_sample

ALWAYS = {"log.flush.policy": "always"}
BURSTS = 5

Request = tuple[int, int, dict[str, Any]]


class FlushCounter:
    """Stands in for one log's storage timings: counts its fsyncs (one per write round it joins)."""

    def __init__(self, log: PartitionLog) -> None:
        self._inner: Any = log.timings  # type: ignore[attr-defined]
        self.flushes = 0
        log.timings = self  # type: ignore[attr-defined]

    def on_flush(self, topic: str, partition: int, seconds: float) -> None:
        self.flushes += 1
        if self._inner is not None:
            self._inner.on_flush(topic, partition, seconds)

    def on_append(self, topic: str, partition: int, size: int, seconds: float) -> None:
        if self._inner is not None:
            self._inner.on_append(topic, partition, size, seconds)


async def _send_together(client: AsyncRawClient, requests: Sequence[Request]) -> list[int]:
    """Write every request in one buffer, before reading anything; returns their correlation ids."""
    ids = [client.next_correlation_id() for _ in requests]
    await client.send_frame(
        b"".join(
            encode_request(key, version, body, cid, client.client_id)
            for (key, version, body), cid in zip(requests, ids, strict=True)
        )
    )
    return ids


def _offsets_log(app: App, group: str) -> PartitionLog:
    return app.coordinator.runner(group).log


async def _commit(client: AsyncRawClient, ids: list[int]) -> list[ErrorCode]:
    """The error of each OffsetCommit v8 answer, read in the order of ``ids`` (their request order)."""
    codes = []
    for correlation_id in ids:
        answer = await client.recv(ApiKey.OFFSET_COMMIT, 8, correlation_id)
        codes.append(ErrorCode(answer.topics[0].partitions[0].error_code))
    return codes


async def _scene(app: App, client: AsyncRawClient, port: int, group: str, topic: str = "piped") -> Scene:
    """A simple group that has committed once, so the pipelined commits find everything in place."""
    scene = Scene(client, 8, port, app.node.node_id, topic=topic, group=group)
    first = await client.call(ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset=1))
    assert first.topics[0].partitions[0].error_code == ErrorCode.none
    return scene


async def test_pipelined_commits_share_one_fsync_round(tmp_path: Path) -> None:
    """Five OffsetCommits sent in one buffer share fsync rounds (one, unless a busy machine cuts the
    connection's turn short), where answering them one at a time takes five."""
    async with running_app(tmp_path, **ALWAYS) as (app, port), connected(port) as client:
        scene = Scene(client, 8, port, app.node.node_id, topic="piped", group="piped-group")
        await create_topic(scene)
        await _scene(app, client, port, scene.group)
        counter = FlushCounter(_offsets_log(app, scene.group))
        commits = MAX_PIPELINED_WRITES
        rounds: list[int] = []
        for burst in range(BURSTS):
            requests = [
                (ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset=100 * burst + n))
                for n in range(commits)
            ]
            before = counter.flushes
            ids = await _send_together(client, requests)
            assert await _commit(client, ids) == [ErrorCode.none] * commits
            rounds.append(counter.flushes - before)
        print(f"bursts of {commits} pipelined commits took {rounds} fsync rounds")
        assert all(1 <= taken < commits for taken in rounds)
        assert min(rounds) == 1


async def test_pipelined_commits_beyond_the_cap_wait_for_the_oldest(tmp_path: Path) -> None:
    """Twice the cap of pipelined commits needs at least two rounds: no more than the cap wait at once."""
    async with running_app(tmp_path, **ALWAYS) as (app, port), connected(port) as client:
        scene = Scene(client, 8, port, app.node.node_id, topic="capped", group="capped-group")
        await create_topic(scene)
        await _scene(app, client, port, scene.group, topic="capped")
        counter = FlushCounter(_offsets_log(app, scene.group))
        commits = 2 * MAX_PIPELINED_WRITES
        requests = [(ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset=n)) for n in range(2, commits + 2)]
        ids = await _send_together(client, requests)
        assert await _commit(client, ids) == [ErrorCode.none] * commits
        print(f"{commits} pipelined commits in {counter.flushes} fsync rounds")
        assert 2 <= counter.flushes < commits


async def test_a_fetch_behind_pipelined_commits_reads_the_last_of_them(tmp_path: Path) -> None:
    """An OffsetFetch pipelined behind four OffsetCommits is answered after them, with the last offset."""
    async with running_app(tmp_path, **ALWAYS) as (app, port), connected(port) as client:
        scene = Scene(client, 8, port, app.node.node_id, topic="read-own", group="read-own-group")
        await create_topic(scene)
        await _scene(app, client, port, scene.group, topic="read-own")
        for rounds in range(1, 6):
            offsets = [100 * rounds + n for n in range(4)]
            requests: list[Request] = [
                (ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset=offset)) for offset in offsets
            ]
            requests.append((ApiKey.OFFSET_FETCH, 8, offset_fetch_sample(scene)))
            ids = await _send_together(client, requests)
            assert await _commit(client, ids[:-1]) == [ErrorCode.none] * len(offsets)
            fetched = await client.recv(ApiKey.OFFSET_FETCH, 8, ids[-1])
            assert fetched.groups[0].topics[0].partitions[0].committed_offset == offsets[-1]


async def test_a_commit_answered_at_once_keeps_its_place_between_waiting_ones(tmp_path: Path) -> None:
    """A commit refused at once (unknown topic, bad generation) between waiting ones is answered in order."""
    async with running_app(tmp_path, **ALWAYS) as (app, port), connected(port) as client:
        scene = Scene(client, 8, port, app.node.node_id, topic="mixed", group="mixed-group")
        await create_topic(scene)
        await _scene(app, client, port, scene.group, topic="mixed")
        unknown = commit_sample(scene, offset=7)
        unknown["topics"][0]["name"] = "no-such-topic"
        stale = commit_sample(scene, offset=8)
        stale["generation_id_or_member_epoch"] = 5
        stale["member_id"] = "not-a-member"
        requests: list[Request] = [
            (ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset=5)),
            (ApiKey.OFFSET_COMMIT, 8, unknown),
            (ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset=6)),
            (ApiKey.OFFSET_COMMIT, 8, stale),
            (ApiKey.OFFSET_FETCH, 8, offset_fetch_sample(scene)),
        ]
        ids = await _send_together(client, requests)
        codes = await _commit(client, ids[:4])
        assert codes[0] == codes[2] == ErrorCode.none
        assert codes[1] == ErrorCode.unknown_topic_or_partition
        assert codes[3] != ErrorCode.none
        fetched = await client.recv(ApiKey.OFFSET_FETCH, 8, ids[4])
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 6


def _two_groups_on_different_partitions(app: App) -> tuple[str, str]:
    partition_of = app.coordinator.partition_for
    failing = "failing-group"
    other = next(g for n in range(100) if partition_of(g := f"steady-group-{n}") != partition_of(failing))
    return failing, other


def _fail_next_append(log: PartitionLog) -> list[int]:
    """The log's next append fails (as a full disk would); returns a list that counts the failures."""
    failures: list[int] = []
    append_soon = log.append_soon
    append = log.append

    def refuse_soon(batch: Any, on_written: Any = None) -> Any:
        log.append_soon = append_soon  # type: ignore[method-assign]
        return None  # the runner falls back to append(), which fails

    async def failing_append(batch: bytes) -> AppendResult:
        log.append = append  # type: ignore[method-assign]
        failures.append(len(batch))
        raise OSError(28, "No space left on device (injected)")

    log.append_soon = refuse_soon  # type: ignore[method-assign]
    log.append = failing_append  # type: ignore[method-assign]
    return failures


@pytest.mark.server_log_allows("offsets_log.append_failed")
async def test_a_failed_round_answers_only_its_own_pipelined_commits(tmp_path: Path) -> None:
    """Commits pipelined to two partitions, one of whose appends fails: its commits answer NOT_COORDINATOR
    in their places, the others succeed, and the failed partition reloads with acknowledged offsets only."""
    async with running_app(tmp_path, **ALWAYS) as (app, port), connected(port) as client:
        failing, steady = _two_groups_on_different_partitions(app)
        scene = Scene(client, 8, port, app.node.node_id, topic="halves", group=failing)
        await create_topic(scene)
        await _scene(app, client, port, failing, topic="halves")
        other = await _scene(app, client, port, steady, topic="halves")
        failures = _fail_next_append(_offsets_log(app, failing))
        requests: list[Request] = [
            (ApiKey.OFFSET_COMMIT, 8, commit_sample(other, offset=20)),
            (ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset=30)),
            (ApiKey.OFFSET_COMMIT, 8, commit_sample(other, offset=21)),
            (ApiKey.OFFSET_COMMIT, 8, commit_sample(scene, offset=31)),
        ]
        ids = await _send_together(client, requests)
        codes = await _commit(client, ids)
        print(f"answers in request order: {[code.name for code in codes]}")
        assert len(failures) == 1
        assert codes[:3] == [ErrorCode.none, ErrorCode.not_coordinator, ErrorCode.none]
        # Joined the failed round (the usual case), or came after it (a turn cut short on a busy machine).
        assert codes[3] in {ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress, ErrorCode.none}
        assert await _fetched_once_loaded(client, other) == 21
        assert await _fetched_once_loaded(client, scene) == (31 if codes[3] == ErrorCode.none else 1)


async def _fetched_once_loaded(client: AsyncRawClient, scene: Scene) -> int:
    """The group's committed offset, asked again while its partition reloads (bounded)."""
    for _ in range(200):
        fetched = await client.call(ApiKey.OFFSET_FETCH, 8, offset_fetch_sample(scene))
        group = fetched.groups[0]
        if group.error_code == ErrorCode.coordinator_load_in_progress:
            await asyncio.sleep(0.02)
            continue
        assert group.error_code == ErrorCode.none
        return int(group.topics[0].partitions[0].committed_offset)
    raise AssertionError(f"{scene.group}'s partition did not load again within 4 s")


CLOSED_LOOP_CONNECTIONS = 10
CLOSED_LOOP_COMMITS = 60
IN_FLIGHT = 4


async def _keep_four_in_flight(app: App, port: int, index: int) -> list[int]:
    """One connection that keeps four commits in flight, sending the next as each answer arrives
    (as the bench's load does); returns the correlation ids of the answers in the order they came."""
    async with connected(port) as client:
        scene = Scene(client, 8, port, app.node.node_id, topic="closed-loop", group=f"closed-loop-{index}")
        answered: list[int] = []
        sent = 0

        def send_one() -> None:
            nonlocal sent
            sent += 1
            body = commit_sample(scene, offset=sent)
            client.writer.write(encode_request(ApiKey.OFFSET_COMMIT, 8, body, sent, client.client_id))

        for _ in range(IN_FLIGHT):
            send_one()
        while len(answered) < CLOSED_LOOP_COMMITS:
            answer = await client.recv(ApiKey.OFFSET_COMMIT, 8, len(answered) + 1)
            assert answer.topics[0].partitions[0].error_code == ErrorCode.none
            answered.append(len(answered) + 1)
            if sent < CLOSED_LOOP_COMMITS:
                send_one()
        return answered


async def test_commits_kept_in_flight_are_all_answered_in_order(tmp_path: Path) -> None:
    """Ten connections each keeping four commits in flight (the next sent as an answer arrives, so
    requests reach the server while earlier ones wait) get every answer, in request order."""
    async with running_app(tmp_path, **ALWAYS) as (app, port), connected(port) as client:
        await create_topic(Scene(client, 8, port, app.node.node_id, topic="closed-loop"))
        answers = await asyncio.wait_for(
            asyncio.gather(*(_keep_four_in_flight(app, port, n) for n in range(CLOSED_LOOP_CONNECTIONS))), 60
        )
        assert answers == [list(range(1, CLOSED_LOOP_COMMITS + 1))] * CLOSED_LOOP_CONNECTIONS
