"""The storage password kept off the command line: against a PostgreSQL that asks TCP clients for a
password, ``kcoord serve --storage postgresql://USER@HOST/DB`` takes it from ``PGPASSWORD`` or from the
file ``PGPASSFILE`` names (libpq's variables, which asyncpg reads), and no process argument shows it.
Without a password the start fails at once in one line."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kcoord.protocol.errors import ErrorCode
from tests.cli.test_startup_errors import no_traceback, serve
from tests.support.cluster_nodes import commit_error, create_topic
from tests.support.postgres import SUPERUSER, PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess

PASSWORD = "s3cret-only-in-the-environment"


@pytest.fixture(scope="module")
def guarded() -> Iterator[PostgresCluster]:
    """A PostgreSQL of its own whose TCP clients must give the superuser's password (SCRAM)."""
    cluster = PostgresCluster(password=PASSWORD).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def no_password(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither variable set, and no ``~/.pgpass`` to fall back on."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "absent"))


def serves_with_the_password_hidden(node: KcoordProcess) -> None:
    """The node commits, and neither its arguments nor /proc show the password."""
    create_topic(node, "t", 1)
    with RawClient(node.host, node.port) as client:
        assert commit_error(client, "g", "t", 1) == ErrorCode.none
    assert node.proc is not None
    cmdline = Path(f"/proc/{node.proc.pid}/cmdline").read_bytes().decode()
    assert PASSWORD not in cmdline and PASSWORD not in " ".join(node.command())


@pytest.mark.usefixtures("no_password")
def test_the_password_comes_from_pgpassword(
    guarded: PostgresCluster,
    kcoord_factory: type[KcoordProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PGPASSWORD in the environment and a URL without a password: the node starts and commits."""
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    database = guarded.create_database()
    assert PASSWORD not in database
    serves_with_the_password_hidden(
        kcoord_factory(tmp_path / "data", {"kcoord.storage.url": database}).start()
    )


@pytest.mark.usefixtures("no_password")
def test_the_password_comes_from_a_pgpass_file(
    guarded: PostgresCluster,
    kcoord_factory: type[KcoordProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 0600 password file named by PGPASSFILE (libpq's format): the node starts and commits."""
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{guarded.port}:*:{SUPERUSER}:{PASSWORD}\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    database = guarded.create_database()
    serves_with_the_password_hidden(
        kcoord_factory(tmp_path / "data", {"kcoord.storage.url": database}).start()
    )


@pytest.mark.usefixtures("no_password")
def test_no_password_fails_the_start_at_once_in_one_line(guarded: PostgresCluster, tmp_path: Path) -> None:
    """Without a password the start exits 3 with one line, without waiting for the database to
    change its mind."""
    database = guarded.create_database()
    data = tmp_path / "data"
    started = time.monotonic()
    result = serve(data, "127.0.0.1:0", "127.0.0.1:0", "--storage", database)
    took = time.monotonic() - started
    assert result.returncode == 3 and no_traceback(result.stderr), result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert len(lines) == 1 and lines[0].startswith("kcoord: storage cannot be used: postgres connect failed")
    assert "password" in lines[0] and took < 15
