"""``topics.json`` on real files: the text a round writes (each entry rendered once and kept) is what
``json.dumps`` gives for the whole document, and partitions of many topics grow in one write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcoord.cluster.catalogue import CatalogueDiff, TopicInfo
from kcoord.cluster.catalogue_errors import CatalogueError
from kcoord.cluster.file_catalogue import CATALOGUE_FILE, FileCatalogue
from kcoord.cluster.topic_manager import TopicManager
from kcoord.storage.api import LogStore
from kcoord.storage.file_store import FileLogStore
from kcoord.storage.memory import MemoryLogStore
from tests.apis.broker.topic_app import count_catalogue_writes, make_settings


def _document(topics: list[TopicInfo]) -> str:
    """The catalogue as one ``json.dumps`` of the whole document renders it."""
    entries = [
        {
            "name": info.name,
            "topic_id": str(info.topic_id),
            "partitions": info.partitions,
            "configs": dict(sorted(info.configs.items())),
            "internal": info.internal,
        }
        for info in sorted(topics, key=lambda info: info.name)
    ]
    return json.dumps({"version": 1, "topics": entries}, indent=1) + "\n"


async def _opened(store: LogStore, data_dir: Path) -> tuple[FileCatalogue, TopicManager]:
    await store.open()
    catalogue = FileCatalogue(store, make_settings(), data_dir)
    topics = TopicManager(store, make_settings(), catalogue)
    await topics.load()
    return catalogue, topics


async def test_each_write_is_the_whole_documents_json_as_topics_come_change_and_go(tmp_path: Path) -> None:
    """After creations (a later round's names falling between earlier ones), a config change, growth
    and a delete, ``topics.json`` is byte for byte
    ``json.dumps(document, indent=1)`` of the catalogue, empty catalogue included, and loads back."""
    store = MemoryLogStore()
    _, topics = await _opened(store, tmp_path)
    path = tmp_path / CATALOGUE_FILE
    await topics.create_many([])
    await topics.ensure_many([f"t-{index:03}" for index in range(40, 0, -1)])
    assert path.read_text() == _document(topics.topics())
    await topics.ensure_many(["zz-last", "t-025x", "a-first", "t-0155"])
    assert path.read_text() == _document(topics.topics())
    await topics.alter_configs("t-007", lambda _: {"retention.ms": "60000", "cleanup.policy": "compact"})
    await topics.add_partitions("t-013", 4)
    deleted = await topics.delete("t-020")
    assert deleted.name == "t-020"
    assert path.read_text() == _document(topics.topics())
    for info in topics.topics():
        await topics.delete(info.name)
    assert path.read_text() == json.dumps({"version": 1, "topics": []}, indent=1) + "\n"
    await store.close()
    reopened = MemoryLogStore()
    _, again = await _opened(reopened, tmp_path)
    assert again.topics() == []
    await reopened.close()


async def test_a_catalogue_written_in_rounds_loads_back_as_it_was(tmp_path: Path) -> None:
    """Topics created in several rounds, one grown and one reconfigured, are loaded by a new catalogue
    with the same ids, partition counts and overrides."""
    store = FileLogStore(tmp_path / "data")
    _, topics = await _opened(store, tmp_path)
    for first in range(0, 30, 10):
        await topics.ensure_many([f"r-{index:02}" for index in range(first, first + 10)])
    await topics.add_partitions("r-05", 3)
    await topics.alter_configs("r-11", lambda _: {"retention.ms": "1000"})
    written = topics.topics()
    await store.close()
    reopened = FileLogStore(tmp_path / "data")
    _, again = await _opened(reopened, tmp_path)
    assert again.topics() == written
    assert again.partition_log("r-05", 2) is not None
    await reopened.close()


async def test_partitions_of_many_topics_grow_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """add_partitions with several topics writes the catalogue once, creates every new partition's log,
    and refuses an unknown topic and one that would not grow, by name, growing the others all the same."""
    store = FileLogStore(tmp_path / "data")
    catalogue, topics = await _opened(store, tmp_path)
    await topics.ensure_many(["a", "b", "c"])
    view = {info.name: info for info in topics.topics()}
    writes = count_catalogue_writes(monkeypatch)
    outcome = await catalogue.add_partitions({"a": 3, "b": 1, "c": 2, "nope": 5}, view)
    assert [(info.name, info.partitions) for info in outcome.changes.grown] == [("a", 3), ("c", 2)]
    assert outcome.changes == CatalogueDiff(grown=outcome.changes.grown)
    assert set(outcome.refused) == {"b", "nope"}
    assert str(outcome.refused["b"]) == str(CatalogueError.NOT_GROWING("b", 1, 1))
    assert str(outcome.refused["nope"]) == str(CatalogueError.UNKNOWN("nope"))
    assert writes == [3]
    assert [store.get("a", p) is not None for p in range(3)] == [True, True, True]
    assert store.get("c", 1) is not None and store.get("b", 1) is None
    stored = json.loads((tmp_path / CATALOGUE_FILE).read_text())["topics"]
    assert {entry["name"]: entry["partitions"] for entry in stored} == {"a": 3, "b": 1, "c": 2}
    await store.close()
