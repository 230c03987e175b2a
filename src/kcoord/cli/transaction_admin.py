"""The requests behind ``kcoord transactions abort|find-hanging|describe-producers``, as Kafka's admin
client sends them (``Admin.describeProducers``, ``listTransactions``, ``describeTransactions``,
``abortTransaction``).

- Partitions and their leaders come from Metadata; DescribeProducers and WriteTxnMarkers go to a
  partition's leader (or to the broker ``--broker-id`` names), in batches of at most
  :data:`MAX_BATCH` partitions per request, as Kafka's tool batches them.
- ListTransactions goes to every broker (each lists the transactional ids it coordinates);
  DescribeTransactions to each id's coordinator (FindCoordinator key type 1).
- Aborting writes one abort marker (WriteTxnMarkers, ``transaction_result`` false) for the
  producer to the partition's leader, which needs Cluster CLUSTER_ACTION, as in Kafka.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.serial.errors import SerialError

from kcoord.cli.admin_client import AdminClient, AdminError
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, error_name

__all__ = [
    "MAX_BATCH",
    "AbortSpec",
    "PartitionInfo",
    "ProducerState",
    "abort_transaction",
    "describe_producers",
    "ongoing_partitions",
    "partitions_of",
    "transactional_ids_of",
]

DESCRIBE_PRODUCERS_V = 0
WRITE_TXN_MARKERS_V = 1
LIST_TRANSACTIONS_V = 0
DESCRIBE_TRANSACTIONS_V = 0
MAX_BATCH = 500
LEADER_RETRIES = 5
"""WriteTxnMarkers answered by a former leader: look the leader up again this many times."""
_LEADER_MOVED = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.replica_not_available,
        ErrorCode.broker_not_available,
    }
)

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One active producer of a partition, as DescribeProducers answers it."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    """-1 before any marker was written for this producer on the partition."""
    last_sequence: int
    last_timestamp: int
    transaction_start_offset: int
    """-1 when the producer has no open transaction on the partition."""


@dataclass(frozen=True, slots=True)
class AbortSpec:
    """Kafka's ``AbortTransactionSpec``: the marker that ends one producer's transaction on a partition."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:
        return (
            f"producer {self.producer_id} (epoch {self.producer_epoch}, coordinator epoch "
            f"{self.coordinator_epoch}) on {self.topic}-{self.partition}"
        )


def batches(items: Sequence[_T], size: int = MAX_BATCH) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def brokers(client: AdminClient) -> dict[int, tuple[str, int]]:
    """Every broker's (host, port) by node id."""
    return {int(b.node_id): (str(b.host), int(b.port)) for b in client.metadata([]).brokers}


def partitions_of(client: AdminClient, topics: list[str] | None) -> list[PartitionInfo]:
    """Every partition of the named topics (of every non-internal topic when ``None``, as Kafka's
    ``listTopics``); an unknown or unauthorized topic raises."""
    partitions = []
    for topic in client.metadata(topics).topics:
        code = int(topic.error_code)
        if code == ErrorCode.unknown_topic_or_partition:
            raise AdminError(f"topic {topic.name!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
        if code != 0:
            raise AdminError(f"topic {topic.name!r}: {error_name(code)}")
        if topics is None and topic.is_internal:
            continue
        for part in topic.partitions:
            partitions.append(
                PartitionInfo(
                    str(topic.name),
                    int(part.partition_index),
                    int(part.leader_id),
                    tuple(int(r) for r in part.replica_nodes),
                )
            )
    return sorted(partitions, key=lambda p: (p.topic, p.partition))


def partition_info(client: AdminClient, topic: str, partition: int) -> PartitionInfo:
    """One partition's leader; a topic or partition that does not exist raises."""
    for info in partitions_of(client, [topic]):
        if info.partition == partition:
            return info
    raise AdminError(f"topic {topic!r} has no partition {partition} (UNKNOWN_TOPIC_OR_PARTITION)")


def address_of(client: AdminClient, broker_id: int) -> tuple[str, int]:
    known = brokers(client)
    if broker_id not in known:
        raise AdminError(f"no broker {broker_id} in the cluster (brokers: {sorted(known)})")
    return known[broker_id]


def describe_producers(
    client: AdminClient, partitions: Sequence[PartitionInfo], broker_id: int | None = None
) -> list[ProducerState]:
    """DescribeProducers of each partition, asked of its leader (or of ``broker_id``); a partition
    answered with an error raises."""
    by_broker: dict[int, list[PartitionInfo]] = {}
    for info in partitions:
        by_broker.setdefault(info.leader if broker_id is None else broker_id, []).append(info)
    found: list[ProducerState] = []
    for node, owned in sorted(by_broker.items()):
        address = address_of(client, node)
        for batch in batches(owned):
            response = client.broker_call(
                address, ApiKey.DESCRIBE_PRODUCERS, DESCRIBE_PRODUCERS_V, _by_topic(batch)
            )
            found.extend(_producer_states(response, node))
    return found


def _by_topic(partitions: Iterable[PartitionInfo]) -> dict[str, Any]:
    grouped: dict[str, list[int]] = {}
    for info in partitions:
        grouped.setdefault(info.topic, []).append(info.partition)
    return {"topics": [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]}


def _producer_states(response: Any, node: int) -> Iterator[ProducerState]:
    for topic in response.topics:
        for part in topic.partitions:
            code = int(part.error_code)
            where = f"{topic.name}-{part.partition_index}"
            if code == ErrorCode.topic_authorization_failed:
                raise AdminError(
                    f"DescribeProducers {where}: not authorized (needs READ on topic {topic.name!r}; "
                    "TOPIC_AUTHORIZATION_FAILED)"
                )
            if code != 0:
                raise AdminError(f"DescribeProducers {where} on broker {node}: {error_name(code)}")
            for p in part.active_producers:
                yield ProducerState(
                    str(topic.name),
                    int(part.partition_index),
                    int(p.producer_id),
                    int(p.producer_epoch),
                    int(p.coordinator_epoch),
                    int(p.last_sequence),
                    int(p.last_timestamp),
                    int(p.current_txn_start_offset),
                )


def transactional_ids_of(client: AdminClient, producer_ids: Iterable[int]) -> dict[int, str]:
    """Producer id -> transactional id, for the ids some coordinator holds (ListTransactions with a
    producer id filter, asked of every broker)."""
    wanted = sorted(set(producer_ids))
    if not wanted:
        return {}
    found: dict[int, str] = {}
    for node, address in sorted(brokers(client).items()):
        response = client.broker_call(
            address,
            ApiKey.LIST_TRANSACTIONS,
            LIST_TRANSACTIONS_V,
            {"state_filters": [], "producer_id_filters": wanted},
        )
        code = int(response.error_code)
        if code != 0:
            raise AdminError(f"ListTransactions on broker {node}: {error_name(code)}")
        for listed in response.transaction_states:
            if int(listed.producer_id) in wanted:
                found[int(listed.producer_id)] = str(listed.transactional_id)
    return found


def ongoing_partitions(client: AdminClient, transactional_id: str) -> set[tuple[str, int]] | None:
    """The partitions the id's coordinator still expects to write a marker to (those of its ongoing
    or completing transaction), or None when the coordinator does not know the id."""
    try:
        response = client.transaction_coordinator_call(
            transactional_id,
            ApiKey.DESCRIBE_TRANSACTIONS,
            DESCRIBE_TRANSACTIONS_V,
            {"transactional_ids": [transactional_id]},
        )
    except SerialError:
        # kio cannot read Kafka's -1 start time, which only an Empty id (no transaction) answers:
        # its coordinator expects no marker anywhere.
        return set()
    (state,) = response.transaction_states
    code = int(state.error_code)
    if code == ErrorCode.transactional_id_not_found:
        return None
    if code != 0:
        raise AdminError(f"DescribeTransactions {transactional_id}: {error_name(code)}")
    return {(str(t.topic), int(p)) for t in state.topics for p in t.partitions}


def abort_transaction(client: AdminClient, spec: AbortSpec) -> None:
    """Write the abort marker of ``spec`` on its partition's leader (looked up again when the
    partition moved); an error answer raises with what it means."""
    for attempt in range(LEADER_RETRIES):
        leader = partition_info(client, spec.topic, spec.partition).leader
        response = client.broker_call(
            address_of(client, leader),
            ApiKey.WRITE_TXN_MARKERS,
            client.version_for(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_V),
            {
                "markers": [
                    {
                        "producer_id": spec.producer_id,
                        "producer_epoch": spec.producer_epoch,
                        "transaction_result": False,
                        "topics": [{"name": spec.topic, "partition_indexes": [spec.partition]}],
                        "coordinator_epoch": spec.coordinator_epoch,
                    }
                ]
            },
        )
        code = _marker_error(response, spec)
        if code == ErrorCode.none:
            return
        if code not in _LEADER_MOVED or attempt == LEADER_RETRIES - 1:
            raise AdminError(f"failed to abort the transaction of {spec}: {_explain(code, spec)}")
        time.sleep(0.2 * (attempt + 1))


def _marker_error(response: Any, spec: AbortSpec) -> ErrorCode:
    """The one partition's error of a WriteTxnMarkers response (Kafka's handler checks its shape too)."""
    results = [
        (int(m.producer_id), str(t.name), int(p.partition_index), int(p.error_code))
        for m in response.markers
        for t in m.topics
        for p in t.partitions
    ]
    if len(results) != 1 or results[0][:3] != (spec.producer_id, spec.topic, spec.partition):
        raise AdminError(f"WriteTxnMarkers answered unexpected entries {results} for {spec}")
    return ErrorCode(results[0][3])


def _explain(code: ErrorCode, spec: AbortSpec) -> str:
    name = error_name(code)
    if code == ErrorCode.cluster_authorization_failed:
        return f"not authorized: writing a transaction marker needs CLUSTER_ACTION on the cluster ({name})"
    if code == ErrorCode.invalid_producer_epoch:
        return f"the partition knows a newer epoch of producer {spec.producer_id} ({name})"
    if code == ErrorCode.transaction_coordinator_fenced:
        return (
            f"a marker from a newer coordinator epoch than {spec.coordinator_epoch} was written "
            f"there ({name})"
        )
    if code == ErrorCode.unknown_topic_or_partition:
        return f"the partition does not exist ({name})"
    return name
