"""``kcoord users add|list|delete``: the SCRAM credentials of a server or of a cluster.

Without ``--storage`` the command works on a data directory's credentials file directly, so the
first user can be created before the server ever starts (as Kafka's ``kafka-storage format
--add-scram``); a running single node re-reads the file at the next login. With ``--storage
postgresql://...`` it works on the credentials a cluster shares in that database (the same
document AlterUserScramCredentials changes through any node; see
:mod:`kcoord.cluster.shared_state`), so users can be added before the first cluster node starts,
and every node applies a change within its poll interval. Passwords are read from stdin or a
prompt, never from the command line, and only salted, iterated keys are stored. Without a
terminal to prompt on (a script, a container), ``add`` says to use ``--password-stdin`` and exits
2. Once a SASL listener is up, clients' admin APIs (AlterUserScramCredentials) manage the same users.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg

from kcoord.cli import users_remote
from kcoord.protocol.errors import KafkaError
from kcoord.security.credentials import Users, credentials_file, decode_users, encode_users
from kcoord.security.scram import MAX_ITERATIONS, ScramCredential, ScramMechanism
from kcoord.storage.documents import StateDocument
from kcoord.storage.postgres.schema import migrate
from kcoord.storage.postgres.shared_documents import SharedDocument

DEFAULT_DATA_DIR = "./data"
DEFAULT_ITERATIONS = 8192
_MECHANISMS = [m.sasl_name for m in ScramMechanism]
EXIT_FAILED = 1
_KIND = "scram_credentials"


def add_commands(commands: Any) -> None:
    users = commands.add_parser("users", help="manage SCRAM users (SASL PLAIN and SCRAM logins)")
    user_commands = users.add_subparsers(dest="users_command", required=True)
    add = user_commands.add_parser("add", help="add a user or change its password")
    add.add_argument("name")
    add.add_argument(
        "--mechanism",
        action="append",
        choices=_MECHANISMS,
        help="SCRAM mechanism (repeatable; default: both)",
    )
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS, help="PBKDF2 iterations")
    add.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    listing = user_commands.add_parser("list", help="users and their mechanisms")
    delete = user_commands.add_parser("delete", help="remove a user (or one of its mechanisms)")
    delete.add_argument("name")
    delete.add_argument("--mechanism", action="append", choices=_MECHANISMS, help="default: all")
    users_remote.add_arguments(add, listing, delete)
    for parser in (add, listing, delete):
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--data-dir", metavar="DIR", help="log.dirs of a single server (default ./data)")
        where.add_argument(
            "--storage",
            metavar="URL",
            help="postgresql:// database of a cluster (kcoord.storage.url): the users every node shares",
        )


def run(args: argparse.Namespace) -> int:
    try:
        if args.bootstrap is not None:
            return users_remote.run(args, _read_password)
        password = _read_password(args) if args.users_command == "add" else ""
        return asyncio.run(_run(args, password))
    except NoTerminalError as exc:
        print(f"kcoord: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ValueError, KafkaError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        print(f"kcoord: {exc}", file=sys.stderr)
        return EXIT_FAILED


async def _run(args: argparse.Namespace, password: str) -> int:
    async with _credentials(args) as document:
        if args.users_command == "list":
            _, current = await document.read_if_changed()
            return _list(decode_users(current, document.location))

        def change(current: Any) -> Any:
            users = decode_users(current, document.location)
            if args.users_command == "add":
                _add(args, users, password)
            elif args.name not in users:
                raise _UnknownUserError(args.name)
            else:
                _delete(args, users)
            return encode_users(users)

        if args.users_command == "add":
            _check_add(args, password)
        try:
            users = decode_users(await document.update(change), document.location)
        except _UnknownUserError:
            print(f"kcoord: no user {args.name!r}", file=sys.stderr)
            return EXIT_FAILED
        if args.users_command == "add":
            entry = users[args.name]
            print(f"{args.name}: {', '.join(m.sasl_name for m in sorted(entry, key=lambda m: m.kafka_type))}")
        return 0


class _UnknownUserError(Exception):
    """Raised inside a change to leave the credentials untouched: there is no such user."""


@asynccontextmanager
async def _credentials(args: argparse.Namespace) -> AsyncIterator[StateDocument]:
    """The data directory's file, or the cluster's shared document (schema migrated first)."""
    if args.storage is None:
        yield credentials_file(Path(args.data_dir or DEFAULT_DATA_DIR))
        return
    if not args.storage.startswith(("postgresql://", "postgres://")):
        raise ValueError("--storage takes a postgresql:// URL (a cluster's kcoord.storage.url)")
    pool = await asyncpg.create_pool(args.storage, min_size=1, max_size=1, timeout=10)
    try:
        async with pool.acquire() as connection:
            await migrate(connection)
        yield SharedDocument(lambda: pool, _KIND)
    finally:
        await pool.close()


def _mechanisms(args: argparse.Namespace) -> list[ScramMechanism]:
    names = args.mechanism or _MECHANISMS
    return [m for m in ScramMechanism if m.sasl_name in names]


EXIT_USAGE = 2


class NoTerminalError(Exception):
    """The password would be prompted for, but no terminal is attached."""


def _has_terminal() -> bool:
    """Whether getpass can prompt: it asks on the controlling terminal, whatever stdin is."""
    try:
        with open("/dev/tty", "rb"):
            return True
    except OSError:
        return False


def _read_password(args: argparse.Namespace) -> str:
    if not 4096 <= args.iterations <= MAX_ITERATIONS:
        raise ValueError(f"--iterations must be 4096..{MAX_ITERATIONS}")
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if not _has_terminal():
        raise NoTerminalError(
            "no terminal to ask for the password; pipe it in with --password-stdin,"
            f" e.g. printf '%s\\n' \"$PASSWORD\" | kcoord users add {args.name} --password-stdin"
        )
    try:
        password = getpass.getpass("password: ")
        again = getpass.getpass("again: ")
    except EOFError:
        raise NoTerminalError(
            "no password given (end of input); use --password-stdin to pipe it in"
        ) from None
    if again != password:
        raise ValueError("the passwords differ")
    return password


def _check_add(args: argparse.Namespace, password: str) -> None:
    if not password:
        raise ValueError("empty password")


def _add(args: argparse.Namespace, users: Users, password: str) -> None:
    entry = users.setdefault(args.name, {})
    for mechanism in _mechanisms(args):
        entry[mechanism] = ScramCredential.from_password(mechanism, password, args.iterations)


def _list(users: Users) -> int:
    for user, entry in sorted(users.items()):
        mechanisms = ", ".join(
            f"{m.sasl_name} ({c.iterations})"
            for m, c in sorted(entry.items(), key=lambda kv: kv[0].kafka_type)
        )
        print(f"{user}\t{mechanisms}")
    return 0


def _delete(args: argparse.Namespace, users: Users) -> None:
    for mechanism in _mechanisms(args):
        users[args.name].pop(mechanism, None)
    if not users[args.name]:
        del users[args.name]
