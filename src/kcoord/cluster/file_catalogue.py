"""The catalogue of a node alone: ``topics.json`` in the data directory.

The file is rewritten whole and atomically (temporary file, fsync, rename, fsync of the directory)
off the event loop after every change; its JSON is built in the worker thread too, so a large
catalogue costs the event loop nothing but a copy of the topic list. Each topic's entry is rendered
once and kept (:class:`_CatalogueText`): a round of a thousand creations in a catalogue of 100,000
topics renders a thousand entries and joins the rest, instead of encoding all of them again while
holding the interpreter lock the event loop needs. It is the truth about which
topics exist; the log store holds their data. At load the two are reconciled:

- a catalogued partition without a log gets an empty one (a crash after the catalogue write);
- logs of a topic the catalogue does not know are deleted (a crash during a delete, or a create
  that failed half-way), since the catalogue is only written once a topic is fully created;
- with no catalogue file at all (a data directory written before it existed, or the file lost),
  every topic found in the store is adopted by the one adoption rule
  (:func:`~kcoord.cluster.catalogue.adopted_topic`).

Logs are created before the catalogue names their topic and deleted after it stops naming it.
A round of creations (auto-creation) creates its logs a few topics at a time and writes the file
once for the round.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import structlog

from kcoord.cluster.catalogue import (
    AdoptionRule,
    CatalogueDiff,
    CatalogueOutcome,
    ConfigChange,
    diff,
)
from kcoord.cluster.catalogue_errors import CatalogueError
from kcoord.cluster.topic_configs import log_config_for
from kcoord.config import Settings
from kcoord.storage.api import LogStore, TopicInfo
from kcoord.storage.atomic_file import write_text_atomically
from kcoord.storage.data_files import read_json_document

__all__ = ["CATALOGUE_FILE", "FileCatalogue"]

log = structlog.get_logger(__name__)

CATALOGUE_FILE = "topics.json"
_CATALOGUE_VERSION = 1

_LOGS_AT_ONCE = 32
"""Topics whose logs a round of creations creates concurrently (the store's threads do the I/O)."""


class FileCatalogue:
    """``topics.json`` and the logs of the topics it names (module docstring)."""

    shared = False

    def __init__(self, store: LogStore, settings: Settings, data_dir: Path) -> None:
        self._store = store
        self._settings = settings
        self.path = Path(data_dir) / CATALOGUE_FILE
        self._topics: dict[str, TopicInfo] = {}
        self._text = _CatalogueText()

    async def load(self, found: Mapping[str, int], adopt: AdoptionRule) -> CatalogueDiff:
        catalogue = await asyncio.to_thread(_read_catalogue, self.path)
        if catalogue is None:
            adopted = [adopt(name, count) for name, count in sorted(found.items())]
            for info in adopted:
                log.warning("topics.adopted", topic=info.name, partitions=info.partitions)
            self._topics = {info.name: info for info in adopted}
            if adopted:
                await self._save()
        else:
            self._topics = {info.name: info for info in catalogue}
            for orphan in sorted(set(found) - set(self._topics)):
                log.warning("topics.orphan_logs_deleted", topic=orphan)
                await self._store.delete_topic(orphan)
        for info in self._topics.values():
            missing = [p for p in range(info.partitions) if self._store.get(info.name, p) is None]
            await self._create_logs(info, missing)
        return CatalogueDiff(created=list(self._topics.values()))

    async def moved(self) -> bool:
        """Nothing but this node changes the file."""
        return False

    async def changes(self, view: Mapping[str, TopicInfo]) -> CatalogueDiff:
        return diff(view, self._topics.values())

    async def create(self, topics: Sequence[TopicInfo], view: Mapping[str, TopicInfo]) -> CatalogueOutcome:
        """Creates the topics' logs (a few at a time, off the loop), then writes the catalogue once.

        A topic whose logs could not be created has them removed and is left out, refused with its
        error (the others are created all the same).
        """
        outcome = CatalogueOutcome(CatalogueDiff())
        fresh: list[TopicInfo] = []
        for info in topics:
            if info.name in self._topics:
                outcome.refused[info.name] = CatalogueError.ALREADY_EXISTS(info.name)
            else:
                fresh.append(info)
        for start in range(0, len(fresh), _LOGS_AT_ONCE):
            chunk = fresh[start : start + _LOGS_AT_ONCE]
            results = await asyncio.gather(
                *(self._create_logs(info, range(info.partitions)) for info in chunk), return_exceptions=True
            )
            for info, result in zip(chunk, results, strict=True):
                if isinstance(result, BaseException):
                    await self._store.delete_topic(info.name)
                    if not isinstance(result, Exception):
                        raise result
                    log.warning("topic.create_failed", topic=info.name, error=repr(result))
                    outcome.refused[info.name] = result
                else:
                    outcome.changes.created.append(info)
        if outcome.changes.created:
            self._topics.update((info.name, info) for info in outcome.changes.created)
            await self._save()
        return outcome

    async def delete(self, name: str, view: Mapping[str, TopicInfo]) -> CatalogueOutcome:
        info = self._topics.get(name)
        if info is None or info.internal:
            return _refusal(name, info, CatalogueError.INTERNAL_DELETE)
        del self._topics[name]
        await self._save()
        return CatalogueOutcome(CatalogueDiff(deleted=[info]), topic=info)

    async def add_partitions(
        self, totals: Mapping[str, int], view: Mapping[str, TopicInfo]
    ) -> CatalogueOutcome:
        """Writes the catalogue once for every topic that grows, then creates their new logs (a few
        topics at a time, off the loop). A topic whose new logs could not be created stays grown (the
        catalogue says so, and the next start creates the missing logs) but is refused with the error."""
        outcome = CatalogueOutcome(CatalogueDiff())
        previous: dict[str, int] = {}
        for name, total in totals.items():
            info = self._topics.get(name)
            if info is None:
                outcome.refused[name] = CatalogueError.UNKNOWN(name)
            elif total <= info.partitions:
                outcome.refused[name] = CatalogueError.NOT_GROWING(name, info.partitions, total)
            else:
                previous[name] = info.partitions
                outcome.changes.grown.append(replace(info, partitions=total))
        if not outcome.changes.grown:
            return outcome
        self._topics.update((info.name, info) for info in outcome.changes.grown)
        await self._save()
        for start in range(0, len(outcome.changes.grown), _LOGS_AT_ONCE):
            chunk = outcome.changes.grown[start : start + _LOGS_AT_ONCE]
            results = await asyncio.gather(
                *(self._create_logs(info, range(previous[info.name], info.partitions)) for info in chunk),
                return_exceptions=True,
            )
            for info, result in zip(chunk, results, strict=True):
                if isinstance(result, BaseException):
                    if not isinstance(result, Exception):
                        raise result
                    log.warning("topic.add_partitions_failed", topic=info.name, error=repr(result))
                    outcome.refused[info.name] = result
        return outcome

    async def alter_configs(
        self, name: str, change: ConfigChange, view: Mapping[str, TopicInfo]
    ) -> CatalogueOutcome:
        info = self._topics.get(name)
        if info is None or info.internal:
            return _refusal(name, info, CatalogueError.INTERNAL_CONFIGS)
        altered = self._topics[name] = replace(info, configs=dict(change(info.configs)))
        await self._save()
        return CatalogueOutcome(CatalogueDiff(reconfigured=[altered]))

    async def drop_logs(self, topic: TopicInfo) -> None:
        await self._store.delete_topic(topic.name)

    def applied_elsewhere(self, change: str) -> None:
        """Never called: no other node shares this catalogue."""

    async def _create_logs(self, info: TopicInfo, partitions: Iterable[int]) -> None:
        config = log_config_for(info.configs, self._settings)
        for partition in partitions:
            await self._store.create(info.name, partition, config)

    async def _save(self) -> None:
        """Writes the whole catalogue; only the list of topics is taken on the loop."""
        await asyncio.to_thread(_write_catalogue, self.path, list(self._topics.values()), self._text)


def _refusal(name: str, info: TopicInfo | None, internal: CatalogueError) -> CatalogueOutcome:
    """A change of topic ``name`` refused: it is unknown (``info`` None), or internal."""
    error = CatalogueError.UNKNOWN(name) if info is None else internal(name)
    return CatalogueOutcome.refusal(name, error)


def _write_catalogue(path: Path, topics: list[TopicInfo], text: _CatalogueText) -> None:
    write_text_atomically(path, text.render(topics))


class _CatalogueText:
    """The text of ``topics.json`` (``json.dumps(document, indent=1)``, byte for byte), each topic's
    entry rendered once and kept until the topic changes, and the names kept in order: a round sorts
    only its new names and merges them in, step by step, rather than sorting 100,000 names in one call
    that would hold the interpreter lock (and so the event loop) throughout. Only the thread that
    writes the file uses it, one write at a time."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[TopicInfo, str]] = {}
        self._order: list[str] = []

    def render(self, topics: Iterable[TopicInfo]) -> str:
        entries: dict[str, tuple[TopicInfo, str]] = {}
        new: list[str] = []
        for info in topics:
            kept = self._entries.get(info.name)
            if kept is None:
                new.append(info.name)
            if kept is None or (kept[0] is not info and kept[0] != info):
                kept = (info, _entry_text(info))
            entries[info.name] = kept
        staying = [name for name in self._order if name in entries]
        self._order = list(heapq.merge(staying, sorted(new))) if new else staying
        self._entries = entries
        if not entries:
            return json.dumps({"version": _CATALOGUE_VERSION, "topics": []}, indent=1) + "\n"
        listed = ",\n".join(entries[name][1] for name in self._order)
        return f'{{\n "version": {_CATALOGUE_VERSION},\n "topics": [\n{listed}\n ]\n}}\n'


def _entry_text(info: TopicInfo) -> str:
    """One topic's entry as ``json.dumps(..., indent=1)`` renders it two levels deep."""
    return "  " + json.dumps(_to_json(info), indent=1).replace("\n", "\n  ")


def _to_json(info: TopicInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "topic_id": str(info.topic_id),
        "partitions": info.partitions,
        "configs": dict(sorted(info.configs.items())),
        "internal": info.internal,
    }


def _from_json(entry: Mapping[str, Any]) -> TopicInfo:
    return TopicInfo(
        name=str(entry["name"]),
        topic_id=uuid.UUID(str(entry["topic_id"])),
        partitions=int(entry["partitions"]),
        configs={str(k): str(v) for k, v in dict(entry.get("configs", {})).items()},
        internal=bool(entry.get("internal", False)),
    )


def _read_catalogue(path: Path) -> list[TopicInfo] | None:
    """The catalogued topics, or None when there is no catalogue file (DataFileError when it is bad)."""
    return read_json_document(path, _parse_catalogue, None)


def _parse_catalogue(document: Any) -> list[TopicInfo]:
    if document.get("version") != _CATALOGUE_VERSION:
        raise ValueError(f"unknown catalogue version {document.get('version')!r}")
    return [_from_json(entry) for entry in document["topics"]]
