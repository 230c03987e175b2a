"""The ``kcoord`` command line: ``serve``, ``config show``, ``groups``, ``topics``, ``produce``, ``consume``,
``users``, ``acls``, ``health``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from kcoord.cli import acls as cli_acls
from kcoord.cli import cluster as cli_cluster
from kcoord.cli import groups as cli_groups
from kcoord.cli import topics as cli_topics
from kcoord.cli import transactions as cli_transactions
from kcoord.cli import users as cli_users
from kcoord.cli.client_config import ClientConfigError
from kcoord.cli.startup import serve
from kcoord.cluster.topic_configs import render_setting
from kcoord.config import Settings, SettingsError
from kcoord.config.definitions import BY_NAME
from kcoord.config.secrets import shown_setting
from kcoord.observability.logging import configure_logging

EXIT_BAD_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kcoord", description="A Kafka-protocol server built around its consumer-group coordinator."
    )
    parser.add_argument("--version", action="version", version=f"kcoord {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve_parser = commands.add_parser("serve", help="run the server")
    _add_setting_flags(serve_parser)

    config = commands.add_parser("config", help="inspect settings")
    config_commands = config.add_subparsers(dest="config_command", required=True)
    show = config_commands.add_parser("show", help="print effective settings and where each came from")
    _add_setting_flags(show)
    cli_groups.add_commands(commands)
    cli_topics.add_commands(commands)
    cli_users.add_commands(commands)
    cli_acls.add_commands(commands)
    cli_cluster.add_commands(commands)
    cli_transactions.add_commands(commands)
    return parser


def _version() -> str:
    try:
        return version("kcoord")
    except PackageNotFoundError:
        return "unknown"


def _default(name: str, fallback: str = "") -> str:
    """A setting's default as help text shows it (the flags default to None so the layers apply)."""
    value = BY_NAME[name].default
    return f"default: {value}" if value is not None else fallback


def _add_setting_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="TOML file of settings (Kafka property names)")
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"Kafka listener (listeners); port 0 = any; {_default('listeners')}",
    )
    parser.add_argument(
        "--advertised-listener",
        metavar="HOST:PORT",
        help="address given to clients (advertised.listeners); default: the bound address",
    )
    parser.add_argument(
        "--data-dir", metavar="DIR", help=f"data directory (log.dirs); {_default('log.dirs')}"
    )
    parser.add_argument(
        "--storage",
        metavar="URL",
        help="log engine URL, e.g. postgresql://... (kcoord.storage.url); default: file:// under --data-dir",
    )
    parser.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help=f"HTTP /metrics and /v1 listener (kcoord.metrics.listen); {_default('kcoord.metrics.listen')}",
    )
    parser.add_argument(
        "--set",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help=(
            "any kcoord setting by its property name (kcoord config show lists them),"
            " e.g. --set num.partitions=3 (repeatable)"
        ),
    )


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            raise SettingsError(f"--set {item!r}: expected NAME=VALUE")
        flags[name.strip()] = value
    named = {
        "listeners": args.listen,
        "advertised.listeners": args.advertised_listener,
        "log.dirs": args.data_dir,
        "kcoord.storage.url": args.storage,
        "kcoord.metrics.listen": args.metrics_listen,
    }
    flags.update({k: v for k, v in named.items() if v is not None})
    return flags


def load_settings(args: argparse.Namespace) -> Settings:
    import os

    config_file = args.config or os.environ.get("KCOORD_CONFIG") or None
    return Settings.load(config_file=config_file, flags=_flags(args))


_CLIENT_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "groups": cli_groups.run,
    "health": cli_groups.run,
    "topics": cli_topics.run,
    "produce": cli_topics.run,
    "consume": cli_topics.run,
    "users": cli_users.run,
    "acls": cli_acls.run,
    "cluster": cli_cluster.run,
    "transactions": cli_transactions.run,
}
"""The commands that act as clients (of a server or of a data directory), by name."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    client_command = _CLIENT_COMMANDS.get(args.command)
    if client_command is not None:
        try:
            return client_command(args)
        except ClientConfigError as exc:
            print(f"kcoord: client properties: {exc}", file=sys.stderr)
            return EXIT_BAD_CONFIG
    try:
        settings = load_settings(args)
    except SettingsError as exc:
        print(f"kcoord: bad setting: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    if args.command == "config":
        return _config_show(settings)
    configure_logging(settings["kcoord.log.format"], settings["kcoord.log.level"], hold_until_started=True)
    return serve(settings)


def _config_show(settings: Settings) -> int:
    """Every effective setting in Kafka's forms (``true``, ``null``, ``a,b``) and where it came from."""
    for name, value in settings.items():
        shown = shown_setting(name, value.value)
        if shown is None:
            text = "null"
        elif isinstance(shown, dict):
            text = ",".join(f"{k}:{v}" for k, v in shown.items())
        else:
            text = render_setting(shown)
        print(f"{name} = {text}    # {value.source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
