"""The rebalance journal on real files: kept per group, bounded, reloaded, and fed by the observer."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kcoord.coordinator.classic.history import HISTORY_LENGTH, NullObserver, RebalanceRecord
from kcoord.runtime.rebalance_journal import JournalingObserver, RebalanceJournal, _as_dict


def finished(n: int, removed: list[str] | None = None) -> RebalanceRecord:
    return RebalanceRecord(
        trigger="member_joined",
        reason=f"rebalance {n}",
        started_ms=1_000 * n,
        generation_before=n,
        members_before=("a",),
        client_reasons=["because"],
        join_completed_ms=1_000 * n + 30,
        completed_ms=1_000 * n + 45,
        generation_after=n + 1,
        members_after=("a", "b"),
        removed_not_rejoined=removed or [],
        outcome="stable",
    )


async def test_history_survives_a_reload(tmp_path: Path) -> None:
    """What one journal recorded, a new one over the same file gives back, field for field."""
    path = tmp_path / "journal.jsonl"
    journal = RebalanceJournal(path)
    await journal.load()
    journal.record("g", finished(1))
    journal.record("g", finished(2, removed=["late-member"]))
    journal.record("other", finished(7))
    await journal.close()

    again = RebalanceJournal(path)
    await again.load()
    assert again.history("g") == [finished(1), finished(2, removed=["late-member"])]
    assert again.history("other") == [finished(7)]
    assert again.history("unknown") == []
    await again.close()


async def test_bounded_per_group_and_compacted_on_load(tmp_path: Path) -> None:
    """Only the last HISTORY_LENGTH rebalances of a group are kept, and loading rewrites the file so."""
    path = tmp_path / "journal.jsonl"
    journal = RebalanceJournal(path)
    await journal.load()
    for n in range(HISTORY_LENGTH + 10):
        journal.record("busy", finished(n))
    await journal.close()
    assert len(path.read_text().splitlines()) == HISTORY_LENGTH + 10

    again = RebalanceJournal(path)
    await again.load()
    kept = again.history("busy")
    assert [record.generation_before for record in kept] == list(range(10, HISTORY_LENGTH + 10))
    await again.close()
    assert len(path.read_text().splitlines()) == HISTORY_LENGTH


async def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    """A crash mid-append leaves a partial line; the lines before it still load."""
    path = tmp_path / "journal.jsonl"
    journal = RebalanceJournal(path)
    await journal.load()
    journal.record("g", finished(1))
    await journal.close()
    with path.open("a") as torn:
        torn.write('{"group":"g","rebalance":{"trig')
    again = RebalanceJournal(path)
    await again.load()
    assert again.history("g") == [finished(1)]
    await again.close()


class Recording(NullObserver):
    def __init__(self) -> None:
        self.finished: list[str] = []
        self.removed: list[str] = []

    def on_rebalance_finished(self, group_id: str, rebalance: RebalanceRecord) -> None:
        self.finished.append(group_id)

    def on_member_removed(self, group_id: str, member_id: str, cause: str, reason: str, now_ms: int) -> None:
        self.removed.append(member_id)


async def test_observer_forwards_and_records(tmp_path: Path) -> None:
    """The journaling observer passes every event on and journals each finished rebalance."""
    journal = RebalanceJournal(tmp_path / "journal.jsonl")
    await journal.load()
    inner = Recording()
    observer = JournalingObserver(inner, journal)
    observer.on_member_removed("g", "m-1", "not_rejoined", "late", 5)
    observer.on_rebalance_finished("g", finished(3))
    assert (inner.finished, inner.removed) == (["g"], ["m-1"])
    assert journal.history("g") == [finished(3)]
    await journal.close()


async def test_a_long_run_is_compacted_while_running_and_loses_nothing(tmp_path: Path) -> None:
    """Past four times what is kept (plus 1,000) the file is rewritten compacted; every record queued
    before or after the rewrite is in the file, in order."""
    path = tmp_path / "journal.jsonl"
    journal = RebalanceJournal(path)
    await journal.load()
    for n in range(1_500):
        journal.record(f"g{n % 3}", finished(n))
    await journal.close()
    assert len(path.read_text().splitlines()) < 1_500

    again = RebalanceJournal(path)
    await again.load()
    for group in range(3):
        expected = [n for n in range(1_500) if n % 3 == group][-HISTORY_LENGTH:]
        assert [r.generation_before for r in again.history(f"g{group}")] == expected
    await again.close()


def test_records_are_kept_as_asdict_would_keep_them() -> None:
    """The journal's mapping of a record is dataclasses.asdict's, lists copied."""
    record = finished(3, removed=["m"])
    kept = _as_dict(record)
    assert kept == dataclasses.asdict(record)
    assert kept["removed_not_rejoined"] is not record.removed_not_rejoined
