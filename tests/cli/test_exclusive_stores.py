"""One store, one process: a second ``kcoord serve`` on a data directory or a PostgreSQL database
another one serves is refused in one line with exit 3, while the first goes on committing and loses
nothing; and a refused start never makes a crash look like a clean stop."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
import time
from pathlib import Path

import asyncpg
import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.storage.postgres.hold import HOLD_KEY
from tests.cli.test_startup_errors import no_traceback, serve
from tests.support.cluster_nodes import commit_error, committed, create_topic
from tests.support.data_dir import listing
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

TOPIC = "kept"
GROUPS = [f"g{n}" for n in range(8)]
REFUSED_STARTS = 3


class Committer(threading.Thread):
    """Commits rising offsets for every group through one node until stopped (bounded: 60 s)."""

    def __init__(self, node: KcoordProcess) -> None:
        super().__init__(daemon=True)
        self.node = node
        self.acknowledged: dict[str, int] = {}
        self.refused: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + 60
        with RawClient(self.node.host, self.node.port) as client:
            offset = 0
            while not self.done.is_set() and time.monotonic() < deadline:
                offset += 1
                for group in GROUPS:
                    error = commit_error(client, group, TOPIC, offset)
                    if error == ErrorCode.none:
                        self.acknowledged[group] = offset
                    else:
                        self.refused.append(error)


def human_lines(stderr: str) -> list[str]:
    """The lines of stderr that are not JSON log events."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("{")]


def refused_while_committing(
    first: KcoordProcess, second_data_dir: Path, *extra: str
) -> tuple[Committer, list[str]]:
    """Start a committer on ``first``, try ``REFUSED_STARTS`` second servers meanwhile; each exits 3
    with one line, which are returned."""
    create_topic(first, TOPIC, 1)
    committer = Committer(first)
    committer.start()
    lines = []
    try:
        for _ in range(REFUSED_STARTS):
            result = serve(second_data_dir, "127.0.0.1:0", "127.0.0.1:0", *extra)
            assert result.returncode == 3 and no_traceback(result.stderr), result.stderr
            (line,) = human_lines(result.stderr)
            lines.append(line)
    finally:
        committer.done.set()
        committer.join(30)
    assert committer.acknowledged and not committer.refused
    return committer, lines


def assert_all_committed(node: KcoordProcess, acknowledged: dict[str, int]) -> None:
    """Every group's committed offset as ``node`` answers it is the last one acknowledged; right after a
    start it first waits (up to 30 s) while the node answers COORDINATOR_LOAD_IN_PROGRESS."""
    deadline = time.monotonic() + 30
    for group, offset in acknowledged.items():
        answer = committed(node, group)
        while answer[0] == ErrorCode.coordinator_load_in_progress and time.monotonic() < deadline:
            time.sleep(0.1)
            answer = committed(node, group)
        assert answer == (ErrorCode.none, offset), group


def test_a_second_server_on_one_data_directory_is_refused_and_the_first_loses_nothing(
    kcoord_factory: type[KcoordProcess], tmp_path: Path
) -> None:
    """While the first server commits, three more ``serve`` on its data directory (other ports) each
    exit 3 with one line naming the directory; every acknowledged commit reads back, before and
    after the first restarts."""
    data = tmp_path / "data"
    first = kcoord_factory(data).start()
    committer, lines = refused_while_committing(first, data)
    assert set(lines) == {
        f"kcoord: data directory {data} is in use by another kcoord process (it holds {data}/.lock)"
    }
    total = sum(committer.acknowledged.values())
    print(f"acknowledged {total} commits while {REFUSED_STARTS} starts were refused")
    assert_all_committed(first, committer.acknowledged)
    assert first.terminate() == 0
    again = kcoord_factory(data).start()
    assert_all_committed(again, committer.acknowledged)
    assert again.events("log_store.opened")[0]["clean_shutdown"] is True


def test_a_second_single_node_on_one_database_is_refused_and_the_first_loses_nothing(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """Two single nodes on one PostgreSQL database (their own data directories): the second exits 3
    naming the database and its holder, never the URL's user; the first's commits all read back."""
    database = postgres_cluster.create_database()
    first = kcoord_factory(tmp_path / "first", {"kcoord.storage.url": database}).start()
    committer, lines = refused_while_committing(first, tmp_path / "second", "--storage", database)
    where = database.split("@", 1)[1]
    assert set(lines) == {
        f"kcoord: database {where} is held by a single kcoord node (connected from 127.0.0.1):"
        " this node cannot use it alone"
    }
    assert_all_committed(first, committer.acknowledged)
    assert first.terminate() == 0
    again = kcoord_factory(tmp_path / "first", {"kcoord.storage.url": database}).start()
    assert_all_committed(again, committer.acknowledged)


@pytest.mark.parametrize("first_is_cluster", [False, True], ids=["single-first", "cluster-first"])
def test_a_cluster_node_and_a_single_node_refuse_each_others_database(
    kcoord_factory: type[KcoordProcess],
    tmp_path: Path,
    postgres_cluster: PostgresCluster,
    first_is_cluster: bool,
) -> None:
    """A cluster node on a single node's database, and a single node on a cluster's, exit 3 naming
    the holder."""
    database = postgres_cluster.create_database()
    cluster = ["--set", "kcoord.cluster.enable=true"]
    first_settings = {"kcoord.storage.url": database}
    if first_is_cluster:
        first_settings["kcoord.cluster.enable"] = "true"
    kcoord_factory(tmp_path / "first", first_settings).start()
    result = serve(
        tmp_path / "second",
        "127.0.0.1:0",
        "127.0.0.1:0",
        "--storage",
        database,
        *([] if first_is_cluster else cluster),
    )
    assert result.returncode == 3 and no_traceback(result.stderr), result.stderr
    (line,) = human_lines(result.stderr)
    holder = "a kcoord cluster" if first_is_cluster else "a single kcoord node"
    wanted = "use it alone" if first_is_cluster else "join it as a node of a cluster"
    assert line.startswith("kcoord: database ") and f"held by {holder}" in line and line.endswith(wanted)


def test_a_crash_stays_a_crash_after_a_refused_start(
    kcoord_factory: type[KcoordProcess], tmp_path: Path
) -> None:
    """A second start refused by the lock, the first SIGKILLed, a start refused for a busy port: the
    next start still reports clean_shutdown false (no refused start wrote the marker)."""
    data = tmp_path / "data"
    first = kcoord_factory(data).start()
    create_topic(first, TOPIC, 1)
    with RawClient(first.host, first.port) as client:
        assert commit_error(client, "g", TOPIC, 5) == ErrorCode.none
    assert serve(data).returncode == 3
    first.kill()
    assert (
        serve(data, f"127.0.0.1:{first.port}", "127.0.0.1:0", "--set", "num.partitions=abc").returncode == 2
    )
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert serve(data, f"127.0.0.1:{busy.getsockname()[1]}").returncode == 4
    restarted = kcoord_factory(data).start()
    assert restarted.events("log_store.opened")[0]["clean_shutdown"] is False
    assert committed(restarted, "g") == (ErrorCode.none, 5)


def test_a_start_refused_by_the_lock_changes_nothing_in_the_directory(
    kcoord_factory: type[KcoordProcess], tmp_path: Path
) -> None:
    """With the first server paused (so that it writes nothing), a second start on its directory is
    refused and leaves every file of it as it was, byte for byte."""
    data = tmp_path / "data"
    first = kcoord_factory(data).start()
    create_topic(first, TOPIC, 1)
    assert first.proc is not None
    os.kill(first.proc.pid, signal.SIGSTOP)
    try:
        before = listing(data)
        assert serve(data).returncode == 3
        assert listing(data) == before
    finally:
        os.kill(first.proc.pid, signal.SIGCONT)
    assert first.terminate() == 0


@pytest.mark.server_log_allows("postgres.hold_given_up")
async def test_a_single_node_whose_database_is_taken_while_its_session_is_lost_exits(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """The node's lock session is terminated and another session takes the lock before the node can
    take it again: the node logs postgres.hold_given_up, prints one kcoord: line and exits 3."""
    database = postgres_cluster.create_database()
    node = kcoord_factory(tmp_path / "data", {"kcoord.storage.url": database}).start()
    assert node.proc is not None
    intruder = await asyncpg.connect(database)
    try:
        await intruder.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'kcoord single node'"
        )
        for _ in range(500):
            if await intruder.fetchval("SELECT pg_try_advisory_lock($1)", HOLD_KEY):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the node's session kept the lock")
        await asyncio.to_thread(node.proc.wait, 30)
    finally:
        await intruder.close()
    assert node.terminate() == 3  # exited already: this only waits for the rest of its log
    assert node.events("postgres.hold_lost") and node.events("postgres.hold_given_up")
    human = [line for line in node.raw_log if line.startswith("kcoord:")]
    assert len(human) == 1 and "is held by a single kcoord node" in human[0], human
