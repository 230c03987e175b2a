"""Data-path requests over :class:`RawClient`: create a topic, produce one batch, fetch, list offsets,
commit offsets.

Each helper sends one request at a fixed, commonly used version and returns the interesting part
of the answer, so that protocol tests read as the scenario they pin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.raw_client import RawClient

CREATE_TOPICS, PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 19, 0, 1, 2, 3, 18
PRODUCE_VERSION = 7
FETCH_VERSION = 11
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


@dataclass(frozen=True)
class FetchedPartition:
    error_code: int
    high_watermark: int
    records: bytes


def create_topic(client: RawClient, name: str, partitions: int = 1, replication_factor: int = 1) -> int:
    """CreateTopics v4 for one topic; returns its error code."""
    response = client.call(
        CREATE_TOPICS,
        4,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 10_000,
        },
    )
    return int(response.topics[0].error_code)


def commit_body(group: str, topic: str, offsets: Mapping[int, int]) -> dict[str, Any]:
    """An OffsetCommit v8 of ``offsets`` (by partition) outside any generation (as admin tools commit)."""
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p, offset in offsets.items()
                ],
            }
        ],
    }


def produce_body(topic: str, partition: int, records: bytes, acks: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def produce(client: RawClient, topic: str, partition: int, records: bytes) -> tuple[int, int]:
    """Produce one partition's records with acks=all; returns (error code, base offset)."""
    response = client.call(PRODUCE, PRODUCE_VERSION, produce_body(topic, partition, records))
    answer = response.responses[0].partition_responses[0]
    return int(answer.error_code), int(answer.base_offset)


def fetch_body(
    topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1
) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 50 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 10 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def parse_fetch(response: Any) -> FetchedPartition:
    answer = response.responses[0].partitions[0]
    return FetchedPartition(int(answer.error_code), int(answer.high_watermark), bytes(answer.records or b""))


def fetch(
    client: RawClient, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0
) -> FetchedPartition:
    """Fetch v11 of one partition from ``offset``."""
    response = client.call(
        FETCH, FETCH_VERSION, fetch_body(topic, partition, offset, max_wait_ms=max_wait_ms)
    )
    return parse_fetch(response)


def list_offset(
    client: RawClient, topic: str, partition: int, timestamp: int = LATEST_TIMESTAMP
) -> tuple[int, int]:
    """ListOffsets v5 for one partition; returns (error code, offset)."""
    response = client.call(
        LIST_OFFSETS,
        5,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}
            ],
        },
    )
    answer = response.topics[0].partitions[0]
    return int(answer.error_code), int(answer.offset)


def stored_compressions(client: RawClient, topic: str, partitions: int) -> set[str]:
    """The codec names of every batch stored in ``topic``, read back with raw Fetches."""
    from tests.support.batches import read_batches

    seen: set[str] = set()
    for partition in range(partitions):
        offset = 0
        while True:
            fetched = fetch(client, topic, partition, offset)
            assert fetched.error_code == 0, (topic, partition, fetched.error_code)
            batches = list(read_batches(fetched.records))
            if not batches:
                break
            seen.update(batch.compression for batch in batches)
            offset = batches[-1].last_offset + 1
            if offset >= fetched.high_watermark:
                break
    return seen
