"""The one adoption rule: both catalogues turn uncatalogued logs into the same topics."""

from __future__ import annotations

import uuid
from pathlib import Path

from kcoord.cluster.catalogue import TopicInfo
from kcoord.cluster.file_catalogue import FileCatalogue
from kcoord.cluster.shared_catalogue import SharedCatalogue
from kcoord.cluster.topic_manager import TopicManager
from kcoord.storage import LogConfig
from kcoord.storage.api import LogStore
from kcoord.storage.memory import MemoryLogStore
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.hold import HoldMode
from tests.apis.broker.topic_app import make_settings
from tests.support.postgres import PostgresCluster

FOUND = {"solo": 3, "__consumer_offsets": 2, "__transaction_state": 1}
"""Logs a node left without a catalogue entry: topic -> partitions."""


async def _write_logs(store: LogStore) -> None:
    for topic, partitions in FOUND.items():
        for partition in range(partitions):
            await store.create(topic, partition)


def _adopted(topics: list[TopicInfo]) -> list[tuple[str, int, dict[str, str], bool]]:
    assert all(info.topic_id != uuid.UUID(int=0) for info in topics)
    return [(info.name, info.partitions, dict(info.configs), info.internal) for info in topics]


async def test_file_and_shared_catalogues_adopt_uncatalogued_logs_alike(
    postgres_cluster: PostgresCluster, tmp_path: Path
) -> None:
    """Logs without a catalogue entry become the same topics (partitions, internal flag, and
    kcoord's configs for the offsets and transaction state topics, segment size included) whether
    ``topics.json`` or the shared table adopts them."""
    settings = make_settings(offsets_topic_segment_bytes=1048576)
    memory = MemoryLogStore(LogConfig())
    await memory.open()
    await _write_logs(memory)
    alone = TopicManager(memory, settings, FileCatalogue(memory, settings, tmp_path))
    await alone.load()
    await memory.close()

    url = postgres_cluster.create_database()
    writer = PostgresLogStore(url, LogConfig(), retention_check_interval_ms=0)
    await writer.open()
    await _write_logs(writer)
    await writer.close()
    node = PostgresLogStore(
        url, LogConfig(), retention_check_interval_ms=0, owned_only=True, hold=HoldMode.SHARED
    )
    await node.open()
    try:
        clustered = TopicManager(node, settings, SharedCatalogue(node))
        await clustered.load()
    finally:
        await node.close()

    expected = [
        ("__consumer_offsets", 2, {"cleanup.policy": "compact", "segment.bytes": "1048576"}, True),
        ("__transaction_state", 1, {"cleanup.policy": "compact", "segment.bytes": "104857600"}, True),
        ("solo", 3, {}, False),
    ]
    assert _adopted(alone.topics()) == expected
    assert _adopted(clustered.topics()) == expected
