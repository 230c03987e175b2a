"""``kcoord users``: add, list and delete SCRAM users in a data directory, passwords never stored."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kcoord.cli.main import main
from kcoord.security.credentials import CredentialFile, decode_users
from kcoord.security.scram import ScramMechanism
from tests.support.postgres import PostgresCluster


def test_add_list_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user added with a password from stdin gets both SCRAM credentials; delete removes one or all."""
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    assert (
        main(
            ["users", "add", "alice", "--password-stdin", "--iterations", "4096", "--data-dir", str(tmp_path)]
        )
        == 0
    )
    users = CredentialFile(tmp_path).read()
    assert set(users["alice"]) == set(ScramMechanism)
    assert users["alice"][ScramMechanism.SCRAM_SHA_512].password_matches(
        ScramMechanism.SCRAM_SHA_512, "s3cret"
    )
    assert b"s3cret" not in (tmp_path / "scram-credentials.json").read_bytes()
    capsys.readouterr()
    assert main(["users", "list", "--data-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "alice\tSCRAM-SHA-256 (4096), SCRAM-SHA-512 (4096)\n"
    assert (
        main(["users", "delete", "alice", "--mechanism", "SCRAM-SHA-256", "--data-dir", str(tmp_path)]) == 0
    )
    assert set(CredentialFile(tmp_path).read()["alice"]) == {ScramMechanism.SCRAM_SHA_512}
    assert main(["users", "delete", "alice", "--data-dir", str(tmp_path)]) == 0
    assert CredentialFile(tmp_path).read() == {}
    assert main(["users", "delete", "alice", "--data-dir", str(tmp_path)]) == 1


def test_iterations_out_of_range_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer than 4096 iterations (Kafka's minimum) is an error, and nothing is written."""
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    assert (
        main(["users", "add", "bob", "--password-stdin", "--iterations", "100", "--data-dir", str(tmp_path)])
        == 1
    )
    assert not (tmp_path / "scram-credentials.json").exists()


def test_a_corrupt_credentials_file_is_reported_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kcoord users list`` over a damaged file names the file and exits 1, without a traceback."""
    (tmp_path / "scram-credentials.json").write_text('{"version": 1, "users": {"alice": 3}}')
    assert main(["users", "list", "--data-dir", str(tmp_path)]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"kcoord: {tmp_path / 'scram-credentials.json'} is corrupt: ")
    assert error.count("\n") == 1


def test_add_without_a_terminal_says_to_use_password_stdin(tmp_path: Path) -> None:
    """``kcoord users add alice --data-dir ./data`` run with no terminal attached (a new session,
    stdin empty) exits 2 with one ``kcoord:`` line pointing at --password-stdin, no traceback and
    no user written."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
    result = subprocess.run(
        [sys.executable, "-m", "kcoord", "users", "add", "alice", "--data-dir", str(tmp_path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
        env=env,
    )
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("kcoord: no terminal to ask for the password; pipe it in with --password-stdin")
    assert CredentialFile(tmp_path).read() == {}


def test_users_of_a_cluster_live_in_its_database(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    postgres_cluster: PostgresCluster,
) -> None:
    """With --storage postgresql:// the users are the cluster's shared document (the schema made on
    first use, before any node started): add, list and delete work there and no file is written."""
    database = postgres_cluster.create_database()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    add = ["users", "add", "alice", "--password-stdin", "--iterations", "4096", "--storage", database]
    assert main(add) == 0
    stored = json.loads(
        postgres_cluster.sql(
            database, "SELECT document FROM shared_documents WHERE kind = 'scram_credentials'"
        )
    )
    users = decode_users(stored, "database")
    assert users["alice"][ScramMechanism.SCRAM_SHA_256].password_matches(
        ScramMechanism.SCRAM_SHA_256, "s3cret"
    )
    assert "s3cret" not in json.dumps(stored)
    capsys.readouterr()
    assert main(["users", "list", "--storage", database]) == 0
    assert capsys.readouterr().out == "alice\tSCRAM-SHA-256 (4096), SCRAM-SHA-512 (4096)\n"
    assert main(["users", "delete", "alice", "--storage", database]) == 0
    assert main(["users", "delete", "alice", "--storage", database]) == 1
    assert main(["users", "list", "--storage", database]) == 0
    assert capsys.readouterr().out == ""
    assert list(tmp_path.iterdir()) == []


def test_storage_must_be_a_postgresql_url(capsys: pytest.CaptureFixture[str]) -> None:
    """--storage names a cluster's database; anything else is refused in one line."""
    assert main(["users", "list", "--storage", "file:///tmp/x"]) == 1
    error = capsys.readouterr().err
    assert error.startswith("kcoord: --storage takes a postgresql:// URL") and error.count("\n") == 1
