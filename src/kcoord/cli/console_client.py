"""Topic administration, Produce and Fetch for ``kcoord topics``, ``produce`` and ``consume``.

Built on :class:`kcoord.cli.admin_client.AdminClient`'s connection, one fixed version per API,
so the command line needs no Kafka client library (kcoord's runtime dependencies stay small).
Errors come back as :class:`AdminError` naming the Kafka error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kcoord.cli.admin_client import AdminClient, AdminError
from kcoord.cli.records import ConsoleRecord, decode_fetched
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import error_name

PRODUCE_V = 7
FETCH_V = 11
CREATE_TOPICS_V = 7
DELETE_TOPICS_V = 4
CREATE_PARTITIONS_V = 3
DESCRIBE_CONFIGS_V = 4
TIMEOUT_MS = 30_000
TOPIC_RESOURCE = 2
DEFAULT_CONFIG_SOURCE = 5
PARTITION_MAX_BYTES = 1 << 20

Partition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    records: list[ConsoleRecord]
    high_watermark: int


def _check(code: Any, what: str, message: str | None = None) -> None:
    """Raise AdminError naming ``what`` and the error (with the broker's message, if any)."""
    if int(code) != 0:
        detail = f" ({message})" if message else ""
        raise AdminError(f"{what}: {error_name(int(code))}{detail}")


def create_topic(client: AdminClient, topic: str, partitions: int, configs: dict[str, str]) -> int:
    """CreateTopics; -1 partitions takes the broker's num.partitions. Returns the partitions made."""
    body = {
        "topics": [
            {
                "name": topic,
                "num_partitions": partitions,
                "replication_factor": -1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout": TIMEOUT_MS,
        "validate_only": False,
    }
    (result,) = client.call(ApiKey.CREATE_TOPICS, CREATE_TOPICS_V, body).topics
    _check(result.error_code, f"topic {topic!r}", result.error_message)
    return int(result.num_partitions)


def delete_topic(client: AdminClient, topic: str) -> None:
    body = {"topic_names": [topic], "timeout": TIMEOUT_MS}
    (result,) = client.call(ApiKey.DELETE_TOPICS, DELETE_TOPICS_V, body).responses
    _check(result.error_code, f"topic {topic!r}")


def alter_partitions(client: AdminClient, topic: str, count: int) -> None:
    body = {
        "topics": [{"name": topic, "count": count, "assignments": None}],
        "timeout": TIMEOUT_MS,
        "validate_only": False,
    }
    (result,) = client.call(ApiKey.CREATE_PARTITIONS, CREATE_PARTITIONS_V, body).results
    _check(result.error_code, f"topic {topic!r}", result.error_message)


def topic_configs(client: AdminClient, topic: str) -> dict[str, str | None]:
    """The topic's configs that are not the broker's defaults."""
    body = {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    (result,) = client.call(ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_V, body).results
    _check(result.error_code, f"topic {topic!r}")
    return {
        str(c.name): None if c.value is None else str(c.value)
        for c in result.configs
        if int(c.config_source) != DEFAULT_CONFIG_SOURCE
    }


def produce(client: AdminClient, topic: str, partition: int, batch: bytes) -> int:
    """Produce one batch with acks=all; returns the base offset the broker gave it."""
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout": TIMEOUT_MS,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    (topic_response,) = client.call(ApiKey.PRODUCE, PRODUCE_V, body).responses
    (part,) = topic_response.partition_responses
    _check(part.error_code, f"produce to {topic}-{partition}")
    return int(part.base_offset)


def fetch(
    client: AdminClient, positions: dict[Partition, int], max_wait_ms: int
) -> dict[Partition, FetchedPartition]:
    """One Fetch (no session) from each position; records before a position are dropped."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in sorted(positions.items()):
        by_topic.setdefault(topic, []).append((partition, offset))
    body = {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 8 * PARTITION_MAX_BYTES,
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
                        "partition_max_bytes": PARTITION_MAX_BYTES,
                    }
                    for partition, offset in parts
                ],
            }
            for topic, parts in by_topic.items()
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    response = client.call(ApiKey.FETCH, FETCH_V, body)
    _check(response.error_code, "fetch")
    fetched = {}
    for topic_response in response.responses:
        for part in topic_response.partitions:
            key = (str(topic_response.topic), int(part.partition_index))
            _check(part.error_code, f"fetch {key[0]}-{key[1]}")
            records = decode_fetched(bytes(part.records or b""), key[1], positions[key])
            fetched[key] = FetchedPartition(records, int(part.high_watermark))
    return fetched
