"""``kcoord users add|list|delete --bootstrap HOST:PORT``: the same commands through a running server.

With ``--bootstrap`` the data directory (or database) is not touched: the server's own store is.

They speak DescribeUserScramCredentials and AlterUserScramCredentials (v0), as Kafka's
``kafka-configs --alter --add-config SCRAM-SHA-512=[...]`` does, so they work against any Kafka
broker and over any listener ``--command-config`` can reach. The password is salted and iterated
here; only the salted password crosses the (TLS) connection, and the server keeps only the derived
keys. The server asks Cluster ALTER (DESCRIBE for ``list``) when its authorizer is on.
"""

from __future__ import annotations

import argparse
import secrets
from collections.abc import Callable
from typing import Any

from kcoord.cli.admin_client import AdminClient, AdminError
from kcoord.cli.client_config import add_command_config_argument
from kcoord.cli.groups import client_for, reports_admin_errors
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import error_name
from kcoord.security.scram import ScramMechanism

DESCRIBE_V = 0
ALTER_V = 0
SALT_BYTES = 32


def add_arguments(*parsers: argparse.ArgumentParser) -> None:
    """``--bootstrap`` and ``--command-config`` on ``users add``, ``list`` and ``delete``."""
    for parser in parsers:
        parser.add_argument(
            "--bootstrap",
            metavar="HOST:PORT",
            help="manage the users through a running server (Alter/DescribeUserScramCredentials)",
        )
        add_command_config_argument(parser)


@reports_admin_errors
def run(args: argparse.Namespace, read_password: Callable[[argparse.Namespace], str]) -> int:
    """One users command against ``--bootstrap``; errors print ``kcoord: ...`` and exit 1."""
    named = getattr(args, "mechanism", None)
    mechanisms = [m for m in ScramMechanism if named is None or m.sasl_name in named]
    with client_for(args) as client:
        if args.users_command == "list":
            for user, credentials in describe(client):
                shown = ", ".join(f"{m.sasl_name} ({i})" for m, i in credentials)
                print(f"{user}\t{shown}")
            return 0
        if args.users_command == "add":
            password = read_password(args)
            if not password:
                raise AdminError("empty password")
            upsert(client, args.name, mechanisms, password, args.iterations)
            print(f"{args.name}: {', '.join(m.sasl_name for m in mechanisms)}")
            return 0
        delete(client, args.name, None if named is None else mechanisms)
        return 0


def describe(
    client: AdminClient, users: list[str] | None = None
) -> list[tuple[str, list[tuple[ScramMechanism, int]]]]:
    """Every user (or the named ones) with its mechanisms and iteration counts, sorted."""
    body = {"users": None if users is None else [{"name": u} for u in users]}
    response = client.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, DESCRIBE_V, body)
    _raise_for(response.error_code, response.error_message, "DescribeUserScramCredentials")
    found = []
    for result in response.results:
        _raise_for(result.error_code, result.error_message, f"user {result.user!r}")
        credentials = [
            (mechanism, int(info.iterations))
            for info in result.credential_infos
            if (mechanism := ScramMechanism.from_kafka_type(int(info.mechanism))) is not None
        ]
        found.append((str(result.user), sorted(credentials, key=lambda c: c[0].kafka_type)))
    return sorted(found)


def upsert(
    client: AdminClient, user: str, mechanisms: list[ScramMechanism], password: str, iterations: int
) -> None:
    """Set the user's password for each mechanism (a fresh random salt each)."""
    upsertions = []
    for mechanism in mechanisms:
        salt = secrets.token_bytes(SALT_BYTES)
        upsertions.append(
            {
                "name": user,
                "mechanism": mechanism.kafka_type,
                "iterations": iterations,
                "salt": salt,
                "salted_password": mechanism.salted_password(password, salt, iterations),
            }
        )
    _alter(client, {"deletions": [], "upsertions": upsertions})


def delete(client: AdminClient, user: str, mechanisms: list[ScramMechanism] | None) -> None:
    """Remove the given mechanisms of the user, or all it has when ``None``."""
    if mechanisms is None:
        ((_, credentials),) = describe(client, [user])
        mechanisms = [m for m, _ in credentials]
    deletions = [{"name": user, "mechanism": m.kafka_type} for m in mechanisms]
    _alter(client, {"deletions": deletions, "upsertions": []})


def _alter(client: AdminClient, body: dict[str, Any]) -> None:
    response = client.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ALTER_V, body)
    for result in response.results:
        _raise_for(result.error_code, result.error_message, f"user {result.user!r}")


def _raise_for(code: Any, message: str | None, what: str) -> None:
    if int(code) != 0:
        detail = f" ({message})" if message else ""
        raise AdminError(f"{what}: {error_name(int(code))}{detail}")
