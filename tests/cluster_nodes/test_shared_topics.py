"""Issue 9, the shared topic catalogue: three nodes over one real PostgreSQL agree on which topics
exist, their ids and their config overrides, whichever node changed them, and the owner of a
partition applies a config changed on another node.

The bound for a change to reach every node is one membership renewal (1 s by default) plus a
round trip; the tests allow :data:`BOUND_S` for a loaded machine.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.batches import build_batch
from tests.support.cluster_nodes import call, metric_samples, start_nodes, wait_converged, wait_until
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import list_offset, produce
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

BOUND_S = 5.0
"""How long a change may take to reach every node here (renewal interval 1 s, plus a loaded CI)."""
RESOURCE_TOPIC = 2
EARLIEST = -2
SET = 0


def _create(node: KcoordProcess, name: str, partitions: int, configs: dict[str, str]) -> int:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout": 10_000,
        "validate_only": False,
    }
    return int(call(node, ApiKey.CREATE_TOPICS, 5, body).topics[0].error_code)


def _described(node: KcoordProcess, name: str) -> dict[str, tuple[str | None, int]]:
    """Topic ``name``'s configs as ``node`` describes them: name -> (value, source); {} if unknown."""
    body = {
        "resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    (result,) = call(node, ApiKey.DESCRIBE_CONFIGS, 4, body).results
    if result.error_code != ErrorCode.none:
        return {}
    return {entry.name: (entry.value, int(entry.config_source)) for entry in result.configs}


def _alter(node: KcoordProcess, name: str, configs: dict[str, str]) -> int:
    body = {
        "resources": [
            {
                "resource_type": RESOURCE_TOPIC,
                "resource_name": name,
                "configs": [{"name": k, "config_operation": SET, "value": v} for k, v in configs.items()],
            }
        ],
        "validate_only": False,
    }
    return int(call(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0].error_code)


def _delete(node: KcoordProcess, name: str) -> int:
    body = {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "timeout": 10_000}
    return int(call(node, ApiKey.DELETE_TOPICS, 6, body).responses[0].error_code)


def _metadata(node: KcoordProcess, name: str) -> Any:
    """The Metadata v12 entry of ``name`` as ``node`` answers it (never auto-creating)."""
    body = {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": name}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    (entry,) = call(node, ApiKey.METADATA, 12, body).topics
    return entry


def _leader(nodes: list[KcoordProcess], name: str) -> KcoordProcess:
    """The node leading partition 0 of ``name`` (waiting for its owner to claim it)."""
    found: list[int] = []

    def led() -> bool:
        entry = _metadata(nodes[0], name)
        leaders = [p.leader_id for p in entry.partitions if p.partition_index == 0 and p.error_code == 0]
        found[:] = [leader for leader in leaders if leader >= 0]
        return bool(found)

    wait_until(led, 30, f"a leader for {name}-0")
    return next(node for node in nodes if int(node.settings["node.id"]) == found[0])


def _applied_metric(node: KcoordProcess, change: str) -> float:
    samples = metric_samples(node, "kcoord_topic_catalogue_changes_applied_total")
    values = [sample.value for sample in samples if sample.labels == {"change": change}]
    return values[0] if values else 0.0


def test_configs_deletion_and_recreation_are_shared_by_every_node(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """Overrides set at creation on A are described by B; an IncrementalAlterConfigs on B is seen by
    C and applied by the partition's owner (retention.ms deletes old data, max.message.bytes
    refuses a large batch); a delete on C makes A and B answer UNKNOWN_TOPIC_OR_PARTITION; the
    name created again has a new id and an empty log. Every step within BOUND_S."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3, **{"log.retention.check.interval.ms": "300"})
    a, b, c = nodes
    wait_converged(nodes, postgres_cluster, database)
    topic = "shared"
    overrides = {"retention.ms": "3600000", "segment.bytes": "4096", "max.message.bytes": "100000"}
    assert _create(a, topic, 1, overrides) == ErrorCode.none
    seen_by_b = wait_until(
        lambda: {k: _described(b, topic).get(k, (None, 0))[0] for k in overrides} == overrides,
        BOUND_S,
        "B describes A's overrides",
    )
    assert _described(b, topic)["retention.ms"][1] == 1  # DYNAMIC_TOPIC_CONFIG
    first_id = _metadata(a, topic).topic_id
    assert wait_until(lambda: _metadata(c, topic).topic_id == first_id, BOUND_S, "C has A's topic id") >= 0

    leader = _leader(nodes, topic)
    ten_minutes_ago = int(time.time() * 1000) - 600_000
    with RawClient(leader.host, leader.port) as raw:
        for n in range(20):
            batch = build_batch([(b"k", b"x" * 500)], timestamp_ms=ten_minutes_ago + n)
            assert produce(raw, topic, 0, batch)[0] == ErrorCode.none
        assert list_offset(raw, topic, 0, EARLIEST) == (ErrorCode.none, 0)

    assert _alter(b, topic, {"retention.ms": "60000", "max.message.bytes": "2000"}) == ErrorCode.none
    wanted = {"retention.ms": "60000", "max.message.bytes": "2000"}
    seen_by_c = wait_until(
        lambda: {k: _described(c, topic)[k][0] for k in wanted} == wanted, BOUND_S, "C describes B's change"
    )
    with RawClient(leader.host, leader.port) as raw:
        applied = wait_until(
            lambda: list_offset(raw, topic, 0, EARLIEST) == (ErrorCode.none, 20),
            BOUND_S,
            "the owner's retention deletes the ten-minute-old records",
        )
        large = build_batch([(b"k", b"y" * 3000)], timestamp_ms=int(time.time() * 1000))
        assert produce(raw, topic, 0, large)[0] == ErrorCode.message_too_large
        small = build_batch([(b"k", b"z" * 100)], timestamp_ms=int(time.time() * 1000))
        assert produce(raw, topic, 0, small) == (ErrorCode.none, 20)
    if leader is not b:
        assert leader.events("topic.configs_altered")[-1]["origin"] == "another node"

    assert _delete(c, topic) == ErrorCode.none
    gone = {
        node.settings["node.id"]: wait_until(
            lambda node=node: _metadata(node, topic).error_code == ErrorCode.unknown_topic_or_partition,
            BOUND_S,
            f"node {node.settings['node.id']} forgets the deleted topic",
        )
        for node in (a, b)
    }
    assert _applied_metric(a, "deleted") == 1.0 and _applied_metric(c, "deleted") == 0.0

    assert _create(a, topic, 1, {}) == ErrorCode.none
    second_id = _metadata(a, topic).topic_id
    assert second_id != first_id
    wait_until(lambda: _metadata(b, topic).topic_id == second_id, BOUND_S, "B has the new topic id")
    assert _described(b, topic)["retention.ms"][1] != 1  # the old override went with the old topic
    new_leader = _leader(nodes, topic)
    with RawClient(new_leader.host, new_leader.port) as raw:
        assert list_offset(raw, topic, 0, EARLIEST) == (ErrorCode.none, 0)
        assert list_offset(raw, topic, 0) == (ErrorCode.none, 0)
    print(
        f"shared catalogue (s): B saw A's create {seen_by_b:.2f}, C saw B's alter {seen_by_c:.2f},"
        f" owner applied retention {applied:.2f}, deletion seen {gone}"
    )


def _race(first: KcoordProcess, second: KcoordProcess, name: str) -> dict[int, int]:
    """``first`` creates ``name`` with 2 partitions and ``second`` with 3 at the same moment;
    partition count -> the error code each answered."""
    results: dict[int, int] = {}
    start = threading.Barrier(2)

    def create(node: KcoordProcess, partitions: int) -> None:
        start.wait(10)
        results[partitions] = _create(node, name, partitions, {})

    threads = [
        threading.Thread(target=create, args=(first, 2)),
        threading.Thread(target=create, args=(second, 3)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


def _agree(nodes: list[KcoordProcess], name: str, partitions: int) -> bool:
    entries = [_metadata(node, name) for node in nodes]
    return len({e.topic_id for e in entries}) == 1 and all(len(e.partitions) == partitions for e in entries)


def test_a_create_race_between_two_nodes_has_exactly_one_winner(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """A and B create the same name at the same moment, five names over: each time one answers
    NONE and the other TOPIC_ALREADY_EXISTS, and all three nodes agree on the winner's id and
    partition count."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 3)
    wait_converged(nodes, postgres_cluster, database)
    for attempt in range(5):
        name = f"raced-{attempt}"
        results = _race(nodes[0], nodes[1], name)
        assert sorted(results.values()) == [ErrorCode.none, ErrorCode.topic_already_exists], results
        winner = next(partitions for partitions, code in results.items() if code == ErrorCode.none)
        wait_until(
            lambda name=name, winner=winner: _agree(nodes, name, winner),
            BOUND_S,
            f"every node has the winner of {name}",
        )
