"""The topic catalogue: validation, changes, listeners, persistence and reconciliation at load."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kcoord.cluster.topic_manager import CATALOGUE_FILE, TopicChange, TopicEvent, TopicManager
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.api import LogConfig
from kcoord.storage.file_store import FileLogStore
from kcoord.storage.memory import MemoryLogStore
from tests.apis.broker.topic_app import make_settings, open_app


async def _manager(tmp_path: Path, **flags: Any) -> TopicManager:
    return (await open_app(tmp_path, **flags)).topics


async def test_create_makes_catalogue_entry_and_logs(tmp_path: Path) -> None:
    """A created topic has a non-zero id, its partitions have logs, and nothing past them does."""
    topics = await _manager(tmp_path)
    info = await topics.create("orders", 3)
    assert topics.get("orders") == info
    assert topics.get_by_id(info.topic_id) == info
    assert info.topic_id != uuid.UUID(int=0) and info.partitions == 3 and not info.internal
    assert topics.names() == ["orders"]
    assert [topics.partition_log("orders", p) is not None for p in range(4)] == [True, True, True, False]
    assert topics.partition_log("missing", 0) is None


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad/name", "with space", "ünïcode"])
async def test_illegal_names_are_invalid_topic(tmp_path: Path, name: str) -> None:
    """Kafka's name rules: [a-zA-Z0-9._-], at most 249 characters, not '.' or '..'."""
    topics = await _manager(tmp_path)
    with pytest.raises(KafkaError) as err:
        await topics.create(name, 1)
    assert err.value.code == ErrorCode.invalid_topic_exception
    assert topics.names() == []


@pytest.mark.parametrize("name", ["a" * 249, "A.b_c-9", "..."])
async def test_legal_edge_names_are_accepted(tmp_path: Path, name: str) -> None:
    """The longest legal name and names mixing every legal character class are created."""
    topics = await _manager(tmp_path)
    assert (await topics.create(name, 1)).name == name


async def test_existing_topic_cannot_be_created_again(tmp_path: Path) -> None:
    """A second create of the same name is TOPIC_ALREADY_EXISTS and changes nothing."""
    topics = await _manager(tmp_path)
    first = await topics.create("t", 2)
    with pytest.raises(KafkaError) as err:
        await topics.create("t", 5)
    assert err.value.code == ErrorCode.topic_already_exists
    assert topics.get("t") == first


async def test_concurrent_creates_of_one_name_yield_one_topic(tmp_path: Path) -> None:
    """Racing creates of one name: exactly one wins, the others see TOPIC_ALREADY_EXISTS."""
    topics = await _manager(tmp_path)
    results = await asyncio.gather(*(topics.create("race", 2) for _ in range(5)), return_exceptions=True)
    errors = [r for r in results if isinstance(r, KafkaError)]
    assert len(errors) == 4 and all(e.code == ErrorCode.topic_already_exists for e in errors)


@pytest.mark.parametrize("partitions", [0, -2, 100_001])
async def test_bad_partition_counts_are_invalid_partitions(tmp_path: Path, partitions: int) -> None:
    """Zero, negatives other than -1, and absurd counts are INVALID_PARTITIONS."""
    topics = await _manager(tmp_path)
    with pytest.raises(KafkaError) as err:
        await topics.create("t", partitions)
    assert err.value.code == ErrorCode.invalid_partitions


async def test_minus_one_means_defaults(tmp_path: Path) -> None:
    """-1 partitions and replication factor take num.partitions and the one-node factor."""
    topics = await _manager(tmp_path, num_partitions=4)
    assert (await topics.create("t", -1, -1)).partitions == 4


@pytest.mark.parametrize("factor", [0, 2, 3])
async def test_replication_factor_other_than_one_is_refused(tmp_path: Path, factor: int) -> None:
    """One node can hold one replica: any other factor is INVALID_REPLICATION_FACTOR."""
    topics = await _manager(tmp_path)
    with pytest.raises(KafkaError) as err:
        await topics.create("t", 1, factor)
    assert err.value.code == ErrorCode.invalid_replication_factor


@pytest.mark.parametrize(
    "configs",
    [
        {"no.such.config": "1"},
        {"retention.ms": "soon"},
        {"retention.ms": "-2"},
        {"cleanup.policy": "shred"},
        {"message.timestamp.type": None},
    ],
)
async def test_bad_configs_are_invalid_config(tmp_path: Path, configs: dict[str, str | None]) -> None:
    """Unknown names, unparsable or out-of-range values and nulls are INVALID_CONFIG."""
    topics = await _manager(tmp_path)
    with pytest.raises(KafkaError) as err:
        await topics.create("t", 1, configs=configs)
    assert err.value.code == ErrorCode.invalid_config
    assert topics.names() == []


async def test_overrides_are_kept_canonical_and_reach_the_logs(tmp_path: Path) -> None:
    """Overrides are stored in canonical form and every partition log gets the derived config."""
    topics = await _manager(tmp_path)
    configs = {
        "retention.ms": " 60000",
        "message.timestamp.type": "logappendtime",
        "cleanup.policy": "compact",
    }
    info = await topics.create("t", 2, configs=configs)
    assert info.configs == {
        "retention.ms": "60000",
        "message.timestamp.type": "LogAppendTime",
        "cleanup.policy": "compact",
    }
    for partition in range(2):
        log = topics.partition_log("t", partition)
        assert log is not None
        assert log.config.retention_ms == 60000
        assert log.config.message_timestamp_type == "LogAppendTime"


async def test_max_message_bytes_follows_override_then_setting(tmp_path: Path) -> None:
    """max.message.bytes is the topic override, else the node's message.max.bytes."""
    topics = await _manager(tmp_path, message_max_bytes=5000)
    plain = await topics.create("plain", 1)
    small = await topics.create("small", 1, configs={"max.message.bytes": "100"})
    assert topics.max_message_bytes(plain) == 5000
    assert topics.max_message_bytes(small) == 100


async def test_validate_only_changes_nothing(tmp_path: Path) -> None:
    """validate_only runs every check, returns the zero id and creates neither topic nor log."""
    app = await open_app(tmp_path)
    info = await app.topics.create("t", 3, validate_only=True)
    assert info.topic_id == uuid.UUID(int=0) and info.partitions == 3
    assert app.topics.names() == [] and app.store.partitions() == []
    assert not (tmp_path / CATALOGUE_FILE).exists()


async def test_internal_names_are_reserved_to_kcoord(tmp_path: Path) -> None:
    """Clients cannot create __consumer_offsets; the internal path can, and nobody can delete it."""
    topics = await _manager(tmp_path)
    with pytest.raises(KafkaError) as err:
        await topics.create("__consumer_offsets", 1)
    assert err.value.code == ErrorCode.invalid_request
    info = await topics.create("__consumer_offsets", 2, configs={"cleanup.policy": "compact"}, internal=True)
    assert info.internal
    with pytest.raises(KafkaError) as err:
        await topics.delete("__consumer_offsets")
    assert err.value.code == ErrorCode.invalid_request
    assert topics.get("__consumer_offsets") == info


async def test_ensure_offsets_topic_creates_once_and_keeps_its_count(tmp_path: Path) -> None:
    """The coordinator's offsets topic is compacted and internal; a later call keeps the first count."""
    topics = await _manager(tmp_path, offsets_topic_segment_bytes=1048576)
    assert await topics.ensure_offsets_topic(5) == 5
    assert await topics.ensure_offsets_topic(50) == 5
    info = topics.get("__consumer_offsets")
    assert info is not None and info.internal
    assert info.configs == {"cleanup.policy": "compact", "segment.bytes": "1048576"}
    log = topics.partition_log("__consumer_offsets", 4)
    assert log is not None and log.config.segment_bytes == 1048576


async def test_ensure_auto_creates_with_num_partitions(tmp_path: Path) -> None:
    """ensure() creates an unknown legal topic with num.partitions and returns existing ones as they are."""
    topics = await _manager(tmp_path, num_partitions=3)
    created = await topics.ensure("auto")
    assert created is not None and created.partitions == 3
    assert await topics.ensure("auto") == created


async def test_ensure_respects_auto_create_setting_and_internal_names(tmp_path: Path) -> None:
    """With auto.create.topics.enable=false, or for an internal name, ensure() creates nothing."""
    topics = await _manager(tmp_path, auto_create_topics_enable=False)
    assert await topics.ensure("auto") is None
    topics = await _manager(tmp_path / "other")
    assert await topics.ensure("__consumer_offsets") is None
    assert topics.names() == []


async def test_ensure_rejects_illegal_names(tmp_path: Path) -> None:
    """ensure() of an illegal name is INVALID_TOPIC_EXCEPTION, never a topic."""
    topics = await _manager(tmp_path)
    with pytest.raises(KafkaError) as err:
        await topics.ensure("bad name")
    assert err.value.code == ErrorCode.invalid_topic_exception


async def test_delete_removes_topic_and_logs(tmp_path: Path) -> None:
    """delete() forgets the topic and its id and deletes every partition log."""
    app = await open_app(tmp_path)
    info = await app.topics.create("gone", 2)
    assert (await app.topics.delete("gone")) == info
    assert app.topics.get("gone") is None and app.topics.get_by_id(info.topic_id) is None
    assert app.store.partitions() == []
    with pytest.raises(KafkaError) as err:
        await app.topics.delete("gone")
    assert err.value.code == ErrorCode.unknown_topic_or_partition


async def test_add_partitions_grows_only(tmp_path: Path) -> None:
    """add_partitions() creates the new logs; equal or smaller counts are INVALID_PARTITIONS."""
    topics = await _manager(tmp_path)
    await topics.create("t", 2)
    grown = await topics.add_partitions("t", 5)
    assert grown.partitions == 5 and topics.partition_log("t", 4) is not None
    for count in (5, 3):
        with pytest.raises(KafkaError) as err:
            await topics.add_partitions("t", count)
        assert err.value.code == ErrorCode.invalid_partitions
    with pytest.raises(KafkaError) as err:
        await topics.add_partitions("missing", 9)
    assert err.value.code == ErrorCode.unknown_topic_or_partition


async def test_add_partitions_validate_only_changes_nothing(tmp_path: Path) -> None:
    """A validate-only growth reports the new count but creates no log."""
    topics = await _manager(tmp_path)
    await topics.create("t", 1)
    assert (await topics.add_partitions("t", 4, validate_only=True)).partitions == 4
    topic = topics.get("t")
    assert topic is not None and topic.partitions == 1 and topics.partition_log("t", 1) is None


def _broken_listener(event: TopicEvent) -> None:
    raise RuntimeError(f"listener bug on {event.change}")


async def test_listeners_hear_every_change_until_removed(tmp_path: Path) -> None:
    """Listeners get CREATED, PARTITIONS_ADDED and DELETED even past a failing one, until removed."""
    topics = await _manager(tmp_path)
    events: list[TopicEvent] = []
    remove = topics.add_listener(events.append)
    topics.add_listener(_broken_listener)
    await topics.create("t", 1)
    await topics.add_partitions("t", 3)
    await topics.delete("t")
    assert [(e.change, e.topic.partitions, e.previous_partitions) for e in events] == [
        (TopicChange.CREATED, 1, 0),
        (TopicChange.PARTITIONS_ADDED, 3, 1),
        (TopicChange.DELETED, 3, 3),
    ]
    remove()
    await topics.create("u", 1)
    assert len(events) == 3


async def test_catalogue_survives_restart_with_file_store(tmp_path: Path) -> None:
    """Ids, partition counts, overrides and the internal flag are the same after a reload."""
    store = FileLogStore(tmp_path, LogConfig())
    app = await open_app(tmp_path, store=store)
    orders = await app.topics.create("orders", 3, configs={"retention.ms": "1000"})
    offsets = await app.topics.create("__consumer_offsets", 2, internal=True)
    await app.topics.add_partitions("orders", 4)
    await app.topics.create("doomed", 1)
    await app.topics.delete("doomed")
    await store.close()

    reopened = await open_app(tmp_path, store=FileLogStore(tmp_path, LogConfig()))
    assert reopened.topics.topics() == [offsets, replace(orders, partitions=4)]
    log = reopened.topics.partition_log("orders", 3)
    assert log is not None and log.config.retention_ms == 1000
    assert reopened.topics.get("doomed") is None
    assert ("doomed", 0) not in reopened.store.partitions()
    await reopened.store.close()


async def test_catalogue_file_is_written_whole(tmp_path: Path) -> None:
    """The catalogue is a versioned JSON document and no temporary file is left behind."""
    topics = await _manager(tmp_path)
    info = await topics.create("t", 2, configs={"segment.bytes": "1048576"})
    document = json.loads((tmp_path / CATALOGUE_FILE).read_text())
    assert document == {
        "version": 1,
        "topics": [
            {
                "name": "t",
                "topic_id": str(info.topic_id),
                "partitions": 2,
                "configs": {"segment.bytes": "1048576"},
                "internal": False,
            }
        ],
    }
    assert os.listdir(tmp_path) == [CATALOGUE_FILE]


async def test_load_without_catalogue_adopts_the_stores_logs(tmp_path: Path) -> None:
    """With no catalogue file, every topic the store holds is adopted (partition gaps filled)."""
    store = MemoryLogStore()
    await store.create("legacy", 0)
    await store.create("legacy", 2)
    await store.create("__consumer_offsets", 0)
    app = await open_app(tmp_path, store=store)
    legacy = app.topics.get("legacy")
    assert legacy is not None and legacy.partitions == 3 and not legacy.internal
    assert app.topics.partition_log("legacy", 1) is not None
    offsets = app.topics.get("__consumer_offsets")
    assert offsets is not None and offsets.internal and offsets.configs["cleanup.policy"] == "compact"
    assert (tmp_path / CATALOGUE_FILE).exists()


async def test_load_deletes_orphan_logs_and_recreates_missing_ones(tmp_path: Path) -> None:
    """With a catalogue, logs of unknown topics are deleted and catalogued partitions get logs."""
    first = await open_app(tmp_path)
    await first.topics.create("kept", 2)
    store = MemoryLogStore()
    await store.create("orphan", 0)
    app = await open_app(tmp_path, store=store)
    assert app.topics.names() == ["kept"]
    assert store.partitions() == [("kept", 0), ("kept", 1)]


def test_settings_helper_spells_dots_as_underscores() -> None:
    """The test helper turns num_partitions=3 into the num.partitions setting."""
    assert make_settings(num_partitions=3)["num.partitions"] == 3


async def test_a_known_partition_without_a_local_log_is_led_elsewhere(tmp_path: Path) -> None:
    """A partition the catalogue knows but this node holds no log of (in a cluster: another node owns
    it) answers NOT_LEADER_OR_FOLLOWER, so clients refresh metadata; anything else is unknown."""
    store = MemoryLogStore()
    app = await open_app(tmp_path, store)
    await app.topics.create("orders", 2)
    await store.delete_topic("orders")
    assert app.topics.partition_log("orders", 0) is None
    assert app.topics.missing_log_error("orders", 0) == ErrorCode.not_leader_or_follower
    assert app.topics.missing_log_error("orders", 2) == ErrorCode.unknown_topic_or_partition
    assert app.topics.missing_log_error("nope", 0) == ErrorCode.unknown_topic_or_partition
