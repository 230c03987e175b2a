"""Whole-file replacement on a real directory: the new bytes land, no staging file is left, and every
state file kcoord rewrites goes through it, fsyncing the staged file and then its directory."""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from kcoord.cluster.identity import META_FILE, NodeIdentity, new_cluster_id, write_identity
from kcoord.cluster.producer_ids import ID_BLOCK_FILE, FileIdReservations
from kcoord.cluster.producer_snapshots import SNAPSHOT_DIR, ProducerSnapshots
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.coordinator.consumer.group_configs import SESSION_TIMEOUT
from kcoord.runtime.group_config_store import GROUP_CONFIGS_FILE, GroupConfigStore, group_configs_file
from kcoord.runtime.rebalance_journal import JOURNAL_FILE, RebalanceJournal
from kcoord.security.credentials import CREDENTIALS_FILE, CredentialFile
from kcoord.security.scram_decoy import DECOY_KEY_FILE, DataDirDecoy
from kcoord.storage import open_store
from kcoord.storage.atomic_file import write_atomically, write_text_atomically
from kcoord.storage.log_start_file import LOG_START_FILE, write_log_start
from tests.support.batches import build_batch


def test_a_file_is_created_with_its_directory_and_then_replaced(tmp_path: Path) -> None:
    """The second write replaces the first, in a directory made on demand, with no staging file left."""
    path = tmp_path / "state" / "acls.json"
    write_text_atomically(path, "first\n")
    write_text_atomically(path, "second ✓\n")
    assert path.read_text(encoding="utf-8") == "second ✓\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["acls.json"]


def test_a_new_file_gets_the_mode_asked_for(tmp_path: Path) -> None:
    """A secret written with mode 0o600 is readable by its owner only."""
    path = tmp_path / "secret"
    write_atomically(path, b"\x00\x01", mode=0o600)
    assert path.read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def _identity(data_dir: Path) -> Path:
    write_identity(data_dir, NodeIdentity(1, new_cluster_id()))
    return data_dir / META_FILE


async def _producer_ids(data_dir: Path) -> Path:
    path = data_dir / ID_BLOCK_FILE
    assert await FileIdReservations(path).reserve(1000) == 0
    return path


async def _producer_snapshot(data_dir: Path) -> Path:
    store = open_store((data_dir / "logs").as_uri(), retention_check_interval_ms=0)
    await store.open()
    try:
        partition = await store.create("t", 0)
        idempotent = build_batch(
            [(None, b"v")], timestamp_ms=1_700_000_000_000, producer_id=7, producer_epoch=0, base_sequence=0
        )
        await partition.append(idempotent)
        snapshots = ProducerSnapshots(data_dir, store, ProducerStateManager(data_dir))
        await snapshots.stop()
    finally:
        await store.close()
    return data_dir / SNAPSHOT_DIR / "t-0.json"


async def _rebalance_journal(data_dir: Path) -> Path:
    path = data_dir / JOURNAL_FILE
    path.write_text('{"torn', encoding="utf-8")
    journal = RebalanceJournal(path)
    await journal.load()
    await journal.close()
    return path


async def _group_configs(data_dir: Path) -> Path:
    await GroupConfigStore(group_configs_file(data_dir)).alter("g", lambda _stored: {SESSION_TIMEOUT: 30_000})
    return data_dir / GROUP_CONFIGS_FILE


async def _credentials(data_dir: Path) -> Path:
    CredentialFile(data_dir).write({})
    return data_dir / CREDENTIALS_FILE


async def _log_start(data_dir: Path) -> Path:
    write_log_start(data_dir, 42)
    return data_dir / LOG_START_FILE


async def _scram_decoy_key(data_dir: Path) -> Path:
    await DataDirDecoy(data_dir).ready()
    return data_dir / DECOY_KEY_FILE


def _present(path: Path) -> bool:
    return path.exists()


SITES: dict[str, Callable[[Path], Awaitable[Path]]] = {
    "node identity": _identity,
    "producer-id block": _producer_ids,
    "producer snapshot": _producer_snapshot,
    "rebalance journal": _rebalance_journal,
    "group configs": _group_configs,
    "scram credentials": _credentials,
    "log start offset": _log_start,
    "scram decoy key": _scram_decoy_key,
}


@pytest.mark.parametrize("site", SITES)
async def test_each_state_file_is_replaced_with_a_directory_fsync(
    site: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each site fsyncs its staged file, renames it over the file, then fsyncs the file's directory."""
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    path = await SITES[site](data_dir)

    staged = str(path.with_name(path.name + ".tmp"))
    assert staged in synced, synced
    assert str(path.parent) in synced[synced.index(staged) + 1 :], synced
    assert _present(path) and not _present(Path(staged))
