"""The contract of a state document (ACLs, credentials, group configs), run against both places one
lives: a data directory's file and the row a cluster shares in a real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from kcoord.storage.documents import FileDocument, StateDocument
from kcoord.storage.postgres.schema import migrate
from kcoord.storage.postgres.shared_documents import SharedDocument
from tests.support.postgres import PostgresCluster

Opener = Callable[[], StateDocument]
"""A second handle on the same document: another process (file) or another node (database)."""


@pytest.fixture(params=["file", "postgresql"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    if request.param == "file":
        path = tmp_path / "state.json"
        yield lambda: FileDocument(path)
        return
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    pool = await asyncpg.create_pool(cluster.create_database(), min_size=1, max_size=4)
    async with pool.acquire() as connection:
        await migrate(connection)
    try:
        yield lambda: SharedDocument(lambda: pool, "acls")
    finally:
        await pool.close()


def _append(item: str) -> Callable[[Any], Any]:
    return lambda document: {"items": [*(document or {"items": []})["items"], item]}


async def test_a_missing_document_reads_as_none_once_then_unchanged(opener: Opener) -> None:
    """The first read of a document that does not exist reports it (None); later reads report no change."""
    document = opener()
    assert await document.read_if_changed() == (True, None)
    assert await document.read_if_changed() == (False, None)


async def test_a_change_through_one_handle_is_read_once_by_another(opener: Opener) -> None:
    """An update is durable when it returns: another handle sees it on its next read, and only once."""
    writer, reader = opener(), opener()
    assert await reader.read_if_changed() == (True, None)
    assert await writer.update(_append("a")) == {"items": ["a"]}
    assert await reader.read_if_changed() == (True, {"items": ["a"]})
    assert await reader.read_if_changed() == (False, None)
    assert await writer.read_if_changed() == (False, None), "the writer's own change is not news to it"


async def test_changes_apply_to_the_document_as_stored_not_as_last_read(opener: Opener) -> None:
    """A change made through a handle that has not read the other's change keeps that change."""
    first, second = opener(), opener()
    await first.update(_append("a"))
    assert await second.update(_append("b")) == {"items": ["a", "b"]}
    assert (await opener().read_if_changed())[1] == {"items": ["a", "b"]}


async def test_concurrent_changes_from_many_handles_all_land(opener: Opener) -> None:
    """Twenty changes at once through twenty handles: none is lost (each is applied under the lock)."""
    handles = [opener() for _ in range(20)]
    await asyncio.gather(*(h.update(_append(str(i))) for i, h in enumerate(handles)))
    _, document = await opener().read_if_changed()
    assert sorted(document["items"], key=int) == [str(i) for i in range(20)]


async def test_a_shared_document_is_adopted_once_and_never_overwritten(
    postgres_cluster: PostgresCluster,
) -> None:
    """adopt stores a node's document only while the database has none; a later adopt changes nothing."""
    pool = await asyncpg.create_pool(postgres_cluster.create_database(), min_size=1, max_size=2)
    try:
        async with pool.acquire() as connection:
            await migrate(connection)
        first, second = SharedDocument(lambda: pool, "acls"), SharedDocument(lambda: pool, "acls")
        assert await first.adopt({"items": ["from node 1"]})
        assert not await second.adopt({"items": ["from node 2"]})
        assert (await second.read_if_changed())[1] == {"items": ["from node 1"]}
        other_kind = SharedDocument(lambda: pool, "group_configs")
        assert await other_kind.read_if_changed() == (True, None), "kinds are separate rows"
    finally:
        await pool.close()


async def test_a_file_document_is_replaced_whole_with_its_mode(tmp_path: Path) -> None:
    """A private file document (the credentials) is written owner-only and no temporary file is left."""
    document = FileDocument(tmp_path / "scram-credentials.json", mode=0o600)
    await document.update(_append("a"))
    await document.update(_append("b"))
    mode, names, content = _file_state(tmp_path / "scram-credentials.json")
    assert (mode, names, content) == (0o600, ["scram-credentials.json"], {"items": ["a", "b"]})


def _file_state(path: Path) -> tuple[int, list[str], Any]:
    """The file's permission bits, the names in its directory, and its JSON."""
    return (
        stat.S_IMODE(path.stat().st_mode),
        sorted(p.name for p in path.parent.iterdir()),
        json.loads(path.read_text()),
    )
