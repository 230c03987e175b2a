"""A throwaway PostgreSQL cluster for the tests, started from Debian's ``postgresql`` binaries.

PostgreSQL refuses to run as root, so when the suite runs as root the cluster is initialised and
started as the ``postgres`` user (``runuser``) in a temporary directory that user owns. It listens
on a free loopback port with trust authentication and is stopped (``pg_ctl stop -m fast``) and
deleted at the end of the session. Each test asks for a fresh database of its own.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["PostgresCluster", "postgres_cluster"]

SUPERUSER = "postgres"


def find_bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb`` and ``pg_ctl``."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(Path(path).parts[4])
    )
    if not candidates:
        raise RuntimeError("PostgreSQL is not installed (scripts/test.sh installs Debian's postgresql)")
    return Path(candidates[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresCluster:
    """One running cluster: its port, its superuser, and databases made on demand."""

    def __init__(self, password: str | None = None) -> None:
        """``password``: the superuser's, asked of every TCP client (SCRAM) instead of trusting them."""
        self.password = password
        self.bin_dir = find_bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="kcoord-pg-"))
        self.data_dir = self.root / "data"
        self.socket_dir = self.root / "sock"
        self.port = _free_port()
        self._counter = itertools.count()
        self._as_postgres = os.geteuid() == 0

    def _run(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        env = {**os.environ, "PGPASSWORD": self.password} if self.password else None
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout, env=env)

    def start(self) -> PostgresCluster:
        self.socket_dir.mkdir(parents=True)
        if self._as_postgres:
            user = pwd.getpwnam(SUPERUSER)
            for path in (self.root, self.socket_dir):
                os.chown(path, user.pw_uid, user.pw_gid)
        auth = ["-A", "trust"]
        if self.password is not None:
            password_file = self.root / "superuser-password"
            password_file.write_text(self.password + "\n")
            if self._as_postgres:
                os.chown(password_file, user.pw_uid, user.pw_gid)
            auth = ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={password_file}"]
        self._run("initdb", "-D", str(self.data_dir), "-U", SUPERUSER, *auth, "-E", "UTF8", "--no-sync")
        self.start_server()
        return self

    def start_server(self) -> None:
        """Start the initialised server; returns once it accepts connections."""
        self._pg_ctl("start")

    def _pg_ctl(self, action: str) -> None:
        """``pg_ctl start`` or ``restart`` with this cluster's options, logging to a file (a server
        writing to our pipe would keep ``pg_ctl`` from returning)."""
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.socket_dir}"
            " -c max_connections=200 -c shared_buffers=32MB"
        )
        log = str(self.root / "server.log")
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", log, "-o", options, "-m", "fast", "-w", action)

    def stop_server(self) -> None:
        """Stop the server (fast shutdown), keeping its data for :meth:`start_server`."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        """Stop the server and delete the cluster."""
        try:
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def restart(self) -> None:
        """``pg_ctl restart``: every connection is cut, the data stays."""
        self._pg_ctl("restart")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "kcoord") -> str:
        """A new empty database; its URL."""
        name = f"{prefix}_{os.getpid()}_{next(self._counter)}"
        self._run(
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            SUPERUSER,
            "-d",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-q",
            "-c",
            f'CREATE DATABASE "{name}"',
        )
        return self.url(name)

    def sql(self, database_url: str, statement: str) -> str:
        """Run one statement with psql; its unaligned, tuples-only output."""
        result = self._run("psql", database_url, "-v", "ON_ERROR_STOP=1", "-A", "-t", "-q", "-c", statement)
        return result.stdout.strip()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """The session's PostgreSQL, started on first use and stopped at the end."""
    cluster = PostgresCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()
