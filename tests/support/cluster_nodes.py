"""Several ``kcoord serve`` nodes over one PostgreSQL database, and the raw requests the cluster
tests drive them with (FindCoordinator, OffsetCommit, OffsetFetch, CreateTopics)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.batches import build_batch
from tests.support.client_errors import ErrorLog
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.raw_ops import commit_body, produce
from tests.support.server import KcoordProcess

OFFSETS_PARTITIONS = 12
TRANSACTION_STATE_PARTITIONS = 3
"""``transaction.state.log.num.partitions`` of a test cluster: its nodes own these beside the offsets."""
#: What a node that cannot take a partition's records answers a producer that asked it blindly.
_ROUTING = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition})


def cluster_settings(database: str, node_id: int, **overrides: str) -> dict[str, str]:
    return {
        "kcoord.storage.url": database,
        "kcoord.cluster.enable": "true",
        "node.id": str(node_id),
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "transaction.state.log.num.partitions": str(TRANSACTION_STATE_PARTITIONS),
        **overrides,
    }


def start_nodes(
    factory: type[KcoordProcess], root: Path, database: str, count: int, **overrides: str
) -> list[KcoordProcess]:
    return [
        factory(root / f"node{n}", cluster_settings(database, n, **overrides)).start()
        for n in range(1, count + 1)
    ]


def owners(
    postgres: PostgresCluster, database: str, topic: str = "__consumer_offsets"
) -> dict[int, int | None]:
    """``topic``'s partition -> owning node id as recorded in the database (None: unowned)."""
    rows = postgres.sql(
        database,
        "SELECT partition_id, coalesce(owner_node, -1) FROM log_partitions"
        f" WHERE topic = '{topic}' ORDER BY partition_id",
    )
    result: dict[int, int | None] = {}
    for line in rows.splitlines():
        partition, owner = line.split("|")
        result[int(partition)] = None if owner == "-1" else int(owner)
    return result


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``condition`` every 50 ms; the seconds it took (fails after ``timeout``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {what}")


def call(node: KcoordProcess, api_key: int, version: int, body: dict[str, Any]) -> Any:
    with RawClient(node.host, node.port) as client:
        return client.call(api_key, version, body)


def find_coordinator(node: KcoordProcess, group: str) -> tuple[int, int]:
    """(error code, coordinator node id) as ``node`` answers for ``group``."""
    answer = call(node, ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    return int(answer.error_code), int(answer.node_id)


def create_topic(node: KcoordProcess, topic: str, partitions: int) -> None:
    body = {
        "topics": [
            {
                "name": topic,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout": 10_000,
    }
    answer = call(node, ApiKey.CREATE_TOPICS, 4, body)
    assert answer.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists)


def commit_error(client: RawClient, group: str, topic: str, offset: int) -> int:
    answer = client.call(ApiKey.OFFSET_COMMIT, 8, commit_body(group, topic, {0: offset}))
    return int(answer.topics[0].partitions[0].error_code)


def committed(node: KcoordProcess, group: str) -> tuple[int, int | None]:
    """(group error, committed offset of partition 0 or None) as ``node`` answers."""
    body = {"groups": [{"group_id": group, "topics": None}], "require_stable": False}
    answer = call(node, ApiKey.OFFSET_FETCH, 8, body)
    (entry,) = answer.groups
    offsets = [int(p.committed_offset) for t in entry.topics for p in t.partitions]
    return int(entry.error_code), (offsets[0] if offsets else None)


def group_on(node_id: int, nodes: list[KcoordProcess], prefix: str) -> str:
    """A group id whose coordinator is ``node_id`` (asked of the first node)."""
    for n in range(1000):
        group = f"{prefix}-{n}"
        error, coordinator = find_coordinator(nodes[0], group)
        if error == ErrorCode.none and coordinator == node_id:
            return group
    raise AssertionError(f"no group coordinated by node {node_id}")


def produce_to_leaders(
    nodes: list[KcoordProcess],
    topic: str,
    partitions: int,
    count: int,
    timeout: float = 30.0,
    *,
    allowed: Collection[int] = (),
    errors: ErrorLog | None = None,
) -> set[tuple[int, int]]:
    """Append ``count`` records to each partition at whichever live node leads it now; the
    acknowledged (partition, offset) pairs.

    The producer asks every live node in turn, so NOT_LEADER_OR_FOLLOWER from a node that does not
    lead the partition, and UNKNOWN_TOPIC_OR_PARTITION from one that has not yet read a new topic
    from the shared catalogue (Kafka's brokers answer the same while metadata propagates), are its
    routing, and it moves on. Every other error code answered is recorded
    in ``errors`` and retried only when the test allows it (``allowed``: ``RETRIABLE_CODES`` during a
    fault window, nothing otherwise); an error not allowed fails at once. A partition no live node
    accepts fails after ``timeout``."""
    written: set[tuple[int, int]] = set()
    now_ms = int(time.time() * 1000)
    for partition in range(partitions):
        records = [(f"k{partition}".encode(), f"p{partition}-{i}".encode()) for i in range(count)]
        deadline = time.monotonic() + timeout
        while True:
            for node in nodes:
                if node.proc is None or node.proc.poll() is not None:
                    continue
                try:
                    with RawClient(node.host, node.port, client_id="cluster-producer") as raw:
                        error, base = produce(
                            raw, topic, partition, build_batch(records, timestamp_ms=now_ms)
                        )
                except OSError:
                    continue
                if error == ErrorCode.none:
                    written.update((partition, base + i) for i in range(count))
                    break
                if error in _ROUTING:
                    continue
                if errors is not None:
                    errors.raw("produce", error)
                assert error in allowed, (
                    f"{topic}-{partition}: node {node.settings.get('node.id')} answered Produce with "
                    f"{ErrorCode(error).name}, which this test does not allow"
                )
            else:
                assert time.monotonic() < deadline, f"{topic}-{partition} found no leader"
                time.sleep(0.2)
                continue
            break
    return written


def cluster_status(node: KcoordProcess) -> dict[str, Any]:
    """The node's ``/v1/cluster``."""
    with urllib.request.urlopen(f"http://{node.metrics_address}/v1/cluster", timeout=10) as reply:
        status: dict[str, Any] = json.loads(reply.read())
    return status


def metric_samples(node: KcoordProcess, name: str) -> list[Sample]:
    """The samples named ``name`` (``..._total`` for a counter) on the node's ``/metrics``."""
    with urllib.request.urlopen(f"http://{node.metrics_address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]


def wait_converged(
    nodes: list[KcoordProcess], postgres: PostgresCluster, database: str, timeout: float = 30
) -> None:
    """Wait until the offsets partitions are spread over exactly these nodes in the database and
    every node's view (as of its last renewal) agrees, so any node answers FindCoordinator."""
    ids = {int(node.settings["node.id"]) for node in nodes}
    wait_until(lambda: set(owners(postgres, database).values()) == ids, timeout, "offsets spread")

    def every_view_settled() -> bool:
        for node in nodes:
            status = cluster_status(node)
            seen = {entry["owner"] for entry in status["partitions"].get("__consumer_offsets", [])}
            if seen != ids or {n["node_id"] for n in status["live_nodes"]} != ids:
                return False
        return True

    wait_until(every_view_settled, timeout, "every node sees the spread")
