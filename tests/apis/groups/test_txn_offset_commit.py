"""TxnOffsetCommit over a real socket, with the transaction's marker written through the group coordinator.

A real :class:`App` runs in the test's loop on the file store; the client speaks raw TxnOffsetCommit
and OffsetFetch. The transaction coordinator's part (writing the producer's marker to the group's
``__consumer_offsets`` partition) is played by calling ``App.coordinator.write_end_marker`` in
process, as the transaction coordinator does (contract B).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kcoord.app import App
from kcoord.cli import main
from kcoord.coordinator.offsets import OffsetCommitPartition, OffsetCommitTopic, OffsetFetchTopic
from kcoord.coordinator.txn_offset_commit import TxnOffsetCommitRequest
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.control_batch import ControlRecord, read_control_record
from kcoord.protocol.plain_batch import iter_plain_records
from kcoord.protocol.record_batch import parse_header
from kcoord.runtime.group_coordinator import OFFSETS_TOPIC
from kcoord.runtime.runner import PartitionState
from kcoord.security.acl import AclBinding, AclOperation, AclPermission, PatternType, ResourceType
from tests.protocol.in_process import AsyncRawClient, connected, running_app
from tests.protocol.request_samples import Scene, create_topic, join_and_sync, join_sample, sync_sample
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic as create_topic_raw
from tests.support.server import KcoordProcess

PRODUCER_ID = 5000
TOPIC = "orders"


def txn_commit_body(
    group: str,
    offsets: dict[int, int],
    *,
    epoch: int = 0,
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
) -> dict[str, Any]:
    return {
        "transactional_id": "copier",
        "group_id": group,
        "producer_id": PRODUCER_ID,
        "producer_epoch": epoch,
        "generation_id": generation,
        "member_id": member,
        "group_instance_id": instance,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p, o in offsets.items()
                ],
            }
        ],
    }


async def txn_commit(client: AsyncRawClient, body: dict[str, Any], version: int = 3) -> dict[int, ErrorCode]:
    response = await client.call(ApiKey.TXN_OFFSET_COMMIT, version, body)
    return {int(p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def fetch(
    client: AsyncRawClient, group: str, partitions: list[int], *, stable: bool
) -> dict[int, tuple[int, ErrorCode]]:
    """OffsetFetch v8 of ``orders`` partitions: (offset, error) by partition."""
    topics = [{"name": TOPIC, "partition_indexes": partitions}]
    response = await client.call(
        ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": topics}], "require_stable": stable}
    )
    (answer,) = response.groups
    assert answer.error_code == ErrorCode.none
    return {
        int(p.partition_index): (int(p.committed_offset), p.error_code)
        for t in answer.topics
        for p in t.partitions
    }


async def end_transaction(app: App, group: str, *, committed: bool, epoch: int = 0) -> ErrorCode:
    return await app.coordinator.write_end_marker(
        app.coordinator.partition_for(group), PRODUCER_ID, epoch, committed, 0
    )


async def with_topic(client: AsyncRawClient, app: App, port: int) -> Scene:
    scene = Scene(client, 0, port, app.node.node_id, topic=TOPIC, group="setup")
    await create_topic(scene, TOPIC, partitions=3)
    return scene


async def test_pending_offsets_are_hidden_until_the_commit_marker(tmp_path: Path) -> None:
    """A TxnOffsetCommit is accepted but invisible to OffsetFetch (require_stable: UNSTABLE_OFFSET_COMMIT
    on its partitions only) until write_end_marker commits it; then every fetch sees it."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await with_topic(client, app, port)
        plain = {"group_id": "copy", "generation_id_or_member_epoch": -1, "member_id": "", "topics": []}
        plain["topics"] = [
            {
                "name": TOPIC,
                "partitions": [{"partition_index": 2, "committed_offset": 9, "committed_metadata": ""}],
            }
        ]
        await client.call(ApiKey.OFFSET_COMMIT, 8, plain)
        assert await txn_commit(client, txn_commit_body("copy", {0: 100, 1: 101})) == {
            0: ErrorCode.none,
            1: ErrorCode.none,
        }
        assert await fetch(client, "copy", [0, 1, 2], stable=False) == {
            0: (-1, ErrorCode.none),
            1: (-1, ErrorCode.none),
            2: (9, ErrorCode.none),
        }
        unstable = (-1, ErrorCode.unstable_offset_commit)
        assert await fetch(client, "copy", [0, 1, 2], stable=True) == {
            0: unstable,
            1: unstable,
            2: (9, ErrorCode.none),
        }
        assert await end_transaction(app, "copy", committed=True) == ErrorCode.none
        assert await fetch(client, "copy", [0, 1, 2], stable=True) == {
            0: (100, ErrorCode.none),
            1: (101, ErrorCode.none),
            2: (9, ErrorCode.none),
        }


async def test_an_abort_marker_drops_the_pending_offsets(tmp_path: Path) -> None:
    """After the abort marker the partitions answer what was committed before the transaction."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await with_topic(client, app, port)
        await txn_commit(client, txn_commit_body("copy", {0: 10}))
        await end_transaction(app, "copy", committed=True)
        await txn_commit(client, txn_commit_body("copy", {0: 20}))
        assert await end_transaction(app, "copy", committed=False) == ErrorCode.none
        assert await fetch(client, "copy", [0], stable=True) == {0: (10, ErrorCode.none)}


async def test_a_restart_mid_transaction_keeps_offsets_pending_until_the_marker(tmp_path: Path) -> None:
    """Stopped with a transaction open, the App reloads the offsets still pending; the marker after the
    restart commits them, and the next restart shows them committed (the marker is in the log)."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await with_topic(client, app, port)
        await txn_commit(client, txn_commit_body("copy", {0: 100}))
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        assert await fetch(client, "copy", [0], stable=True) == {0: (-1, ErrorCode.unstable_offset_commit)}
        assert await end_transaction(app, "copy", committed=True) == ErrorCode.none
        assert await fetch(client, "copy", [0], stable=True) == {0: (100, ErrorCode.none)}
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        assert await fetch(client, "copy", [0], stable=True) == {0: (100, ErrorCode.none)}


async def test_kip_447_refuses_old_generations_unknown_members_and_fenced_instances(tmp_path: Path) -> None:
    """TxnOffsetCommit v3 from the group's current member commits; an old generation, an unknown member,
    a missing group with a generation and a static instance's zombie get Kafka's errors."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        scene = await with_topic(client, app, port)
        scene.group = "pipeline"
        await join_and_sync(scene)
        gen, member = scene.generation, scene.member_id
        current = txn_commit_body("pipeline", {0: 1}, generation=gen, member=member)
        assert await txn_commit(client, current) == {0: ErrorCode.none}
        old = txn_commit_body("pipeline", {0: 2}, generation=gen - 1, member=member)
        assert await txn_commit(client, old) == {0: ErrorCode.illegal_generation}
        ghost = txn_commit_body("pipeline", {0: 2}, generation=gen, member="ghost")
        assert await txn_commit(client, ghost) == {0: ErrorCode.unknown_member_id}
        assert await txn_commit(client, txn_commit_body("absent", {0: 2}, generation=1, member="m")) == {
            0: ErrorCode.illegal_generation
        }
        static = Scene(client, 0, port, app.node.node_id, topic=TOPIC, group="static-pipeline")
        joined = await client.call(
            ApiKey.JOIN_GROUP, 5, {**join_sample(static), "group_instance_id": "worker-1"}
        )
        assert joined.error_code == ErrorCode.none
        static.member_id, static.generation = joined.member_id, int(joined.generation_id)
        synced = await client.call(
            ApiKey.SYNC_GROUP, 3, {**sync_sample(static), "group_instance_id": "worker-1"}
        )
        assert synced.error_code == ErrorCode.none
        zombie = txn_commit_body(
            "static-pipeline",
            {0: 2},
            generation=static.generation,
            member="old-incarnation",
            instance="worker-1",
        )
        assert await txn_commit(client, zombie) == {0: ErrorCode.fenced_instance_id}
        assert await end_transaction(app, "pipeline", committed=True) == ErrorCode.none
        assert await fetch(client, "pipeline", [0], stable=True) == {0: (1, ErrorCode.none)}


async def test_write_end_marker_answers_not_coordinator_for_a_partition_not_held(tmp_path: Path) -> None:
    """A marker for a partition this node does not hold is refused with NOT_COORDINATOR (nothing written)."""
    async with running_app(tmp_path) as (app, _port):
        outside = app.coordinator.num_partitions
        assert (
            await app.coordinator.write_end_marker(outside, PRODUCER_ID, 0, True, 0)
            == ErrorCode.not_coordinator
        )


async def test_old_versions_commit_without_member_fields(tmp_path: Path) -> None:
    """TxnOffsetCommit v0 (no generation or member) commits for a simple group like v3 with -1."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await with_topic(client, app, port)
        assert await txn_commit(client, txn_commit_body("old-client", {1: 5}), version=0) == {
            1: ErrorCode.none
        }
        assert await end_transaction(app, "old-client", committed=True) == ErrorCode.none
        assert await fetch(client, "old-client", [1], stable=False) == {1: (5, ErrorCode.none)}


async def test_pending_offsets_survive_sigkill_and_the_marker_after_it_commits_them(
    kcoord_factory: type[KcoordProcess], tmp_path: Path
) -> None:
    """A kcoord process SIGKILLed mid-transaction (flush policy always) comes back with the offsets still
    pending (UNSTABLE_OFFSET_COMMIT, invisible); the producer's commit marker then makes them visible."""
    data_dir = tmp_path / "data"
    server = kcoord_factory(data_dir, {"log.flush.policy": "always"}).start()
    with RawClient(server.host, server.port) as client:
        assert create_topic_raw(client, TOPIC, 3) == 0
        answer = client.call(ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit_body("killed", {0: 70, 1: 71}))
        assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.none] * 2
        topics = [{"name": TOPIC, "partition_indexes": [0, 1]}]
        body = {"groups": [{"group_id": "killed", "topics": topics}], "require_stable": True}
        fetched = client.call(ApiKey.OFFSET_FETCH, 8, body)
        assert {p.error_code for p in fetched.groups[0].topics[0].partitions} == {
            ErrorCode.unstable_offset_commit
        }
    server.kill()
    async with running_app(data_dir) as (app, port), connected(port) as client:
        unstable = (-1, ErrorCode.unstable_offset_commit)
        assert await fetch(client, "killed", [0, 1], stable=True) == {0: unstable, 1: unstable}
        assert await fetch(client, "killed", [0, 1], stable=False) == {
            0: (-1, ErrorCode.none),
            1: (-1, ErrorCode.none),
        }
        assert await end_transaction(app, "killed", committed=True) == ErrorCode.none
        assert await fetch(client, "killed", [0, 1], stable=True) == {
            0: (70, ErrorCode.none),
            1: (71, ErrorCode.none),
        }


async def test_the_offsets_log_holds_the_producers_batch_and_its_marker_in_order(tmp_path: Path) -> None:
    """In ``__consumer_offsets`` a TxnOffsetCommit is a transactional batch of its producer, a plain
    commit after it a plain batch, and the end marker a control batch of the producer holding the
    commit and the coordinator epoch, in the order they were written."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await with_topic(client, app, port)
        await txn_commit(client, txn_commit_body("logged", {0: 1}, epoch=3))
        plain = {
            "name": TOPIC,
            "partitions": [{"partition_index": 1, "committed_offset": 2, "committed_metadata": ""}],
        }
        await client.call(
            ApiKey.OFFSET_COMMIT,
            8,
            {"group_id": "logged", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [plain]},
        )
        partition = app.coordinator.partition_for("logged")
        assert await app.coordinator.write_end_marker(partition, PRODUCER_ID, 3, True, 7) == ErrorCode.none
        log = app.topics.partition_log(OFFSETS_TOPIC, partition)
        assert log is not None
        data = await log.read_async(log.log_start_offset, 1 << 20)
        batches: list[tuple[bool, bool, int, int]] = []
        position, markers = 0, []
        while position < len(data):
            header = parse_header(data, position)
            batches.append(
                (header.is_transactional, header.is_control, header.producer_id, header.producer_epoch)
            )
            if header.is_control:
                markers += [
                    read_control_record(key, value) for _, key, value in iter_plain_records(data, position)
                ]
            position += header.size
        assert batches[-3:] == [
            (True, False, PRODUCER_ID, 3),
            (False, False, -1, -1),
            (True, True, PRODUCER_ID, 3),
        ]
        assert markers == [ControlRecord(committed=True, coordinator_epoch=7)]


def allow(kind: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(kind, name, PatternType.LITERAL, "User:ANONYMOUS", "*", operation, AclPermission.ALLOW)


async def test_acls_transactional_id_write_then_group_read_then_topic_read(tmp_path: Path) -> None:
    """With the authorizer on, in Kafka's order: no TransactionalId WRITE is
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, then no Group READ is GROUP_AUTHORIZATION_FAILED (both for
    every partition, nothing pending), then a topic without READ gets TOPIC_AUTHORIZATION_FAILED while
    the allowed topic's offset goes pending."""
    secured = {
        "authorizer.class.name": "kcoord.security.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
    }
    async with running_app(tmp_path, **secured) as (app, port), connected(port) as client:
        await app.authorizer.create(
            [
                allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALL),
                allow(ResourceType.TOPIC, TOPIC, AclOperation.ALL),
                allow(ResourceType.TOPIC, "secret", AclOperation.CREATE),
                allow(ResourceType.GROUP, "allowed", AclOperation.READ),
                allow(ResourceType.TRANSACTIONAL_ID, "copier", AclOperation.WRITE),
            ]
        )
        await with_topic(client, app, port)
        await create_topic(Scene(client, 0, port, app.node.node_id), "secret")
        no_txn_id = {**txn_commit_body("allowed", {0: 1}), "transactional_id": "stranger"}
        assert await txn_commit(client, no_txn_id) == {0: ErrorCode.transactional_id_authorization_failed}
        assert await txn_commit(client, txn_commit_body("forbidden", {0: 1})) == {
            0: ErrorCode.group_authorization_failed
        }
        both = txn_commit_body("allowed", {0: 1})
        both["topics"].append({**both["topics"][0], "name": "secret"})
        answer = await client.call(ApiKey.TXN_OFFSET_COMMIT, 3, both)
        assert {t.name: [p.error_code for p in t.partitions] for t in answer.topics} == {
            TOPIC: [ErrorCode.none],
            "secret": [ErrorCode.topic_authorization_failed],
        }
        pending = app.coordinator.read("allowed", lambda shard: shard.offsets.pending.partitions("allowed"))
        assert pending == [(TOPIC, 0)]
        assert not app.coordinator.read(
            "forbidden", lambda shard: shard.offsets.pending.has_group("forbidden")
        )


async def group_view(app: App, group: str) -> dict[str, Any]:
    """``/v1/groups/{group}`` from the App's HTTP endpoint."""
    assert app.http.bound is not None
    host, port = app.http.bound
    url = f"http://{host}:{port}/v1/groups/{group}"

    def get() -> dict[str, Any]:
        with urllib.request.urlopen(url, timeout=10) as answer:
            body: dict[str, Any] = json.loads(answer.read())
            return body

    return await asyncio.to_thread(get)


async def test_v1_shows_the_open_transaction_holding_offsets_then_its_commit_in_the_history(
    tmp_path: Path,
) -> None:
    """/v1/groups/{group} lists the open transaction (producer, epoch, pending offsets) while it holds
    the group's offsets, and after the marker lists it no more but shows it in the group's transactions."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await with_topic(client, app, port)
        await txn_commit(client, txn_commit_body("watched", {0: 40, 2: 42}, epoch=2))
        open_view = await group_view(app, "watched")
        assert open_view["open_transactions"] == [
            {
                "producer_id": PRODUCER_ID,
                "producer_epoch": 2,
                "offsets": [
                    {"topic": TOPIC, "partition": 0, "offset": 40},
                    {"topic": TOPIC, "partition": 2, "offset": 42},
                ],
            }
        ]
        assert open_view["offsets"] == [] and open_view["transactions"] == []
        await end_transaction(app, "watched", committed=True, epoch=2)
        settled = await group_view(app, "watched")
        assert settled["open_transactions"] == []
        assert settled["transactions"] == [
            {"producer_id": PRODUCER_ID, "producer_epoch": 2, "result": "commit", "partitions": 2}
        ]
        assert [(o["partition"], o["committed"]) for o in settled["offsets"]] == [(0, 40), (2, 42)]


async def test_a_loading_partition_answers_load_in_progress_to_the_commit_and_the_marker(
    tmp_path: Path,
) -> None:
    """While the group's offsets partition loads, TxnOffsetCommit answers COORDINATOR_LOAD_IN_PROGRESS on
    its partitions and write_end_marker returns it (the transaction coordinator retries), nothing written."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await with_topic(client, app, port)
        runner = app.coordinator.runner("loading")
        end_before = runner.log.log_end_offset
        runner.state = PartitionState.LOADING
        try:
            answer = await txn_commit(client, txn_commit_body("loading", {0: 1}))
            marker = await end_transaction(app, "loading", committed=True)
        finally:
            runner.state = PartitionState.ACTIVE
        assert answer == {0: ErrorCode.coordinator_load_in_progress}
        assert marker == ErrorCode.coordinator_load_in_progress
        assert runner.log.log_end_offset == end_before


async def test_a_stable_fetch_waits_for_a_transactional_commit_still_being_written(tmp_path: Path) -> None:
    """A require_stable fetch served while a TxnOffsetCommit's batch is still on its way to the log is
    answered after it (Kafka serves it as a write): UNSTABLE_OFFSET_COMMIT, where a plain read of that
    moment would not yet see the pending offset."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await with_topic(client, app, port)
        request = TxnOffsetCommitRequest(
            "copier", "racing", PRODUCER_ID, 0, [OffsetCommitTopic(TOPIC, [OffsetCommitPartition(0, 9)])]
        )
        commit = asyncio.ensure_future(app.groups.commit_transactional_offsets(request))
        await asyncio.sleep(0)  # the commit's operation ran; its batch is not durable yet
        asked = [OffsetFetchTopic(TOPIC, [0])]
        before = app.groups.fetch_offsets("racing", asked, True).topics[0].partitions[0].error_code
        await app.groups.offsets_settled("racing")
        after = app.groups.fetch_offsets("racing", asked, True).topics[0].partitions[0].error_code
        assert (before, after) == (ErrorCode.none, ErrorCode.unstable_offset_commit)
        assert (await commit).topics[0].partitions[0].error_code == ErrorCode.none
        assert await fetch(client, "racing", [0], stable=True) == {0: (-1, ErrorCode.unstable_offset_commit)}


async def test_groups_history_lists_the_groups_transactions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kcoord groups history`` prints the open transaction holding the group's offsets, and after its
    abort marker the ended transaction with its result."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await with_topic(client, app, port)
        await txn_commit(client, txn_commit_body("audited", {1: 8}, epoch=1))
        assert app.http.bound is not None
        metrics = "{}:{}".format(*app.http.bound)
        command = ["groups", "history", "audited", "--metrics", metrics]
        assert await asyncio.to_thread(main, command) == 0
        open_lines = [
            line.split() for line in capsys.readouterr().out.splitlines() if str(PRODUCER_ID) in line
        ]
        assert open_lines == [[str(PRODUCER_ID), "1", "open", f"{TOPIC}-1@8"]]
        await end_transaction(app, "audited", committed=False, epoch=1)
        assert await asyncio.to_thread(main, command) == 0
        ended_lines = [
            line.split() for line in capsys.readouterr().out.splitlines() if str(PRODUCER_ID) in line
        ]
        assert ended_lines == [[str(PRODUCER_ID), "1", "abort", "1", "partition(s)"]]
