"""Where the rebalance history outlives the process: a small append-only file per node.

Why a file and not records in the offsets log: the offsets log holds Kafka's record
types only, so Kafka's tools and kcoord's replay read it unchanged, and the history is an
operator's aid, not group state: losing its tail in a crash costs nothing, so it needs no
place in the write path and no fsync per rebalance.

The journal keeps, in memory, the last :data:`HISTORY_LENGTH` finished rebalances of each
group (at most :data:`MAX_GROUPS` groups, the least recently active dropped first). Each
finished rebalance is appended as one JSON line by a single writer thread, in order, never
on the event loop: the loop only queues the record, and one task of the writer serializes and
writes whatever is queued when it runs (a burst of rebalances costs one wake-up of the thread and
one open of the file, not one each). Loading reads the file and rewrites it compacted; while running it is
compacted again once it holds several times what is kept. The core asks for a group's past
rebalances through a plain function when its partition loads
(:meth:`~kcoord.coordinator.shard.GroupCoordinatorShard.on_loaded`), so it stays pure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections import OrderedDict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from kcoord.coordinator.classic.history import (
    HISTORY_LENGTH,
    ClassicGroupObserver,
    NullObserver,
    RebalanceEventObserver,
    RebalanceRecord,
    conversion_events,
    rebalance_events,
)
from kcoord.coordinator.classic.state import ClassicGroupState
from kcoord.storage.atomic_file import write_text_atomically

__all__ = ["JOURNAL_FILE", "JournalingObserver", "RebalanceJournal"]

log = structlog.get_logger(__name__)

JOURNAL_FILE = "rebalance-history.jsonl"
MAX_GROUPS = 10_000
_COMPACT_FACTOR = 4


class RebalanceJournal:
    """The finished rebalances of every group, kept in memory and appended to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._groups: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcoord-journal")
        self._lines = 0
        self._kept = 0
        """Records held in memory over all groups (what a compacted file would hold)."""
        self._queued: list[tuple[str, dict[str, Any]]] = []
        """Records the writer has yet to append, under ``_queue_lock`` (the loop adds, the writer takes)."""
        self._queue_lock = threading.Lock()

    async def load(self) -> None:
        """Read what earlier runs left (a torn last line is skipped) and rewrite it compacted."""
        loop = asyncio.get_running_loop()
        lines = await loop.run_in_executor(self._executor, self._read_lines)
        for line in lines:
            try:
                entry = json.loads(line)
                group, record = str(entry["group"]), dict(entry["rebalance"])
            except (ValueError, KeyError, TypeError):
                continue
            self._remember(group, record)
        await loop.run_in_executor(self._executor, self._rewrite, self._snapshot())
        log.info("rebalance_journal.loaded", groups=len(self._groups), path=str(self.path))

    def history(self, group_id: str) -> list[RebalanceRecord]:
        """The group's kept rebalances, oldest first, as fresh records the core may own."""
        kept = self._groups.get(group_id, ())
        return [_to_record(record) for record in kept]

    def record(self, group_id: str, rebalance: RebalanceRecord) -> None:
        """Keep a finished rebalance and append it to the file in the writer thread."""
        record = _as_dict(rebalance)
        self._remember(group_id, record)
        self._lines += 1
        try:
            if self._lines > _COMPACT_FACTOR * self._kept + 1000:
                with self._queue_lock:
                    self._queued = []  # the snapshot holds them
                pending = self._executor.submit(self._rewrite, self._snapshot())
            else:
                with self._queue_lock:
                    first = not self._queued
                    self._queued.append((group_id, record))
                if not first:
                    return  # the writer task already submitted takes it along
                pending = self._executor.submit(self._append_queued)
        except RuntimeError:
            log.warning("rebalance_journal.closed", group=group_id)
            return
        pending.add_done_callback(_log_failure)

    async def close(self) -> None:
        """Wait for the writes already queued, then stop the writer thread."""
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown, True)

    def _remember(self, group_id: str, record: dict[str, Any]) -> None:
        kept = self._groups.pop(group_id, None)
        if kept is None:
            kept = deque(maxlen=HISTORY_LENGTH)
        self._kept -= len(kept)
        kept.append(record)
        self._kept += len(kept)
        self._groups[group_id] = kept
        while len(self._groups) > MAX_GROUPS:
            _, dropped = self._groups.popitem(last=False)
            self._kept -= len(dropped)

    def _snapshot(self) -> list[str]:
        return [_line(group, record) for group, records in self._groups.items() for record in records]

    # Blocking file work, in the writer thread only.

    def _read_lines(self) -> list[str]:
        try:
            return self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []

    def _append_queued(self) -> None:
        with self._queue_lock:
            queued, self._queued = self._queued, []
        if not queued:
            return
        lines = "".join(_line(group, record) for group, record in queued)
        with self.path.open("a", encoding="utf-8") as journal:
            journal.write(lines)

    def _rewrite(self, lines: list[str]) -> None:
        write_text_atomically(self.path, "".join(lines))
        self._lines = len(lines)


def _line(group_id: str, record: dict[str, Any]) -> str:
    return json.dumps({"group": group_id, "rebalance": record}, separators=(",", ":")) + "\n"


_FIELDS = tuple(field.name for field in dataclasses.fields(RebalanceRecord))


def _as_dict(rebalance: RebalanceRecord) -> dict[str, Any]:
    """``dataclasses.asdict`` for a record's flat fields (strings, numbers, tuples of strings), with
    its lists copied: the same mapping, without asdict's recursion."""
    record: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(rebalance, name)
        record[name] = list(value) if isinstance(value, list) else value
    return record


def _to_record(record: dict[str, Any]) -> RebalanceRecord:
    fields = {field.name for field in dataclasses.fields(RebalanceRecord)}
    values = {name: value for name, value in record.items() if name in fields}
    for name in ("members_before", "members_after"):
        values[name] = tuple(values.get(name, ()))
    for name in ("client_reasons", "removed_not_rejoined", "removed_not_synced"):
        values[name] = list(values.get(name, []))
    return RebalanceRecord(**values)


def _log_failure(done: Future[None]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.error("rebalance_journal.write_failed", error=repr(done.exception()))


class JournalingObserver(NullObserver):
    """Passes every event to ``inner`` and keeps each finished rebalance in ``journal``."""

    def __init__(self, inner: ClassicGroupObserver, journal: RebalanceJournal) -> None:
        self._inner = inner
        self._events: RebalanceEventObserver = rebalance_events(inner)
        self._conversions = conversion_events(inner)
        self._journal = journal

    def on_state_change(
        self, group_id: str, old: ClassicGroupState, new: ClassicGroupState, now_ms: int
    ) -> None:
        self._inner.on_state_change(group_id, old, new, now_ms)

    def on_rebalance_finished(self, group_id: str, rebalance: RebalanceRecord) -> None:
        self._inner.on_rebalance_finished(group_id, rebalance)
        self._journal.record(group_id, rebalance)

    def on_rebalance_started(self, group_id: str, rebalance: RebalanceRecord) -> None:
        self._events.on_rebalance_started(group_id, rebalance)

    def on_join_completed(self, group_id: str, rebalance: RebalanceRecord) -> None:
        self._events.on_join_completed(group_id, rebalance)

    def on_assignment_received(self, group_id: str, leader_id: str, generation_id: int, now_ms: int) -> None:
        self._events.on_assignment_received(group_id, leader_id, generation_id, now_ms)

    def on_member_removed(self, group_id: str, member_id: str, cause: str, reason: str, now_ms: int) -> None:
        self._events.on_member_removed(group_id, member_id, cause, reason, now_ms)

    def on_group_converted(self, group_id: str, into: str, generation: int, members: int) -> None:
        self._conversions.on_group_converted(group_id, into, generation, members)
