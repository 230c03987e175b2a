"""``kcoord users add|list|delete``: the SCRAM credentials in a data directory.

Works on the data directory's credentials file directly, so the first user can be created before
the server ever starts (as Kafka's ``kafka-storage format --add-scram``); a running server re-reads
the file at the next login. Passwords are read from stdin or a prompt, never from the command
line, and only salted, iterated keys are stored. Once a SASL listener is up, clients' admin APIs
(AlterUserScramCredentials) manage the same file.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import Any

from kcoord.cli import users_remote
from kcoord.security.credentials import CredentialFile
from kcoord.security.scram import MAX_ITERATIONS, ScramCredential, ScramMechanism

DEFAULT_DATA_DIR = "./data"
DEFAULT_ITERATIONS = 8192
_MECHANISMS = [m.sasl_name for m in ScramMechanism]
EXIT_FAILED = 1


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
        parser.add_argument(
            "--data-dir", metavar="DIR", default=DEFAULT_DATA_DIR, help="log.dirs of the server"
        )


def run(args: argparse.Namespace) -> int:
    if args.bootstrap is not None:
        return users_remote.run(args, _read_password)
    store = CredentialFile(Path(args.data_dir))
    try:
        if args.users_command == "add":
            return _add(args, store)
        if args.users_command == "list":
            return _list(store)
        return _delete(args, store)
    except (OSError, ValueError) as exc:
        print(f"kcoord: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _mechanisms(args: argparse.Namespace) -> list[ScramMechanism]:
    names = args.mechanism or _MECHANISMS
    return [m for m in ScramMechanism if m.sasl_name in names]


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    password = getpass.getpass("password: ")
    if getpass.getpass("again: ") != password:
        raise ValueError("the passwords differ")
    return password


def _add(args: argparse.Namespace, store: CredentialFile) -> int:
    if not 4096 <= args.iterations <= MAX_ITERATIONS:
        raise ValueError(f"--iterations must be 4096..{MAX_ITERATIONS}")
    password = _read_password(args)
    if not password:
        raise ValueError("empty password")
    users = store.read()
    entry = users.setdefault(args.name, {})
    for mechanism in _mechanisms(args):
        entry[mechanism] = ScramCredential.from_password(mechanism, password, args.iterations)
    store.write(users)
    print(f"{args.name}: {', '.join(m.sasl_name for m in sorted(entry, key=lambda m: m.kafka_type))}")
    return 0


def _list(store: CredentialFile) -> int:
    for user, entry in sorted(store.read().items()):
        mechanisms = ", ".join(
            f"{m.sasl_name} ({c.iterations})"
            for m, c in sorted(entry.items(), key=lambda kv: kv[0].kafka_type)
        )
        print(f"{user}\t{mechanisms}")
    return 0


def _delete(args: argparse.Namespace, store: CredentialFile) -> int:
    users = store.read()
    if args.name not in users:
        print(f"kcoord: no user {args.name!r}", file=sys.stderr)
        return EXIT_FAILED
    for mechanism in _mechanisms(args):
        users[args.name].pop(mechanism, None)
    if not users[args.name]:
        del users[args.name]
    store.write(users)
    return 0
