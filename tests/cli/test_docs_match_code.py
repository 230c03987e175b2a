"""The README and docs/limits.md against the code, so the docs cannot drift: every setting they name
exists (and every ``--set`` and ``KCOORD_`` variable), every ``kcoord`` command and subcommand they
show is in the CLI parser, the dynamic broker configs they list are the ones the code changes at run
time, and every metric they name is in a started server's registry."""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path

import pytest

from kcoord.cli.main import _parser
from kcoord.cluster.topic_configs import TOPIC_CONFIGS
from kcoord.config.definitions import BY_NAME
from kcoord.config.dynamic import DYNAMIC_BROKER_CONFIGS
from kcoord.config.settings import NOT_SETTINGS, NOT_SETTINGS_PREFIXES, env_name
from kcoord.coordinator.consumer.group_configs import GROUP_CONFIG_NAMES
from tests.protocol.in_process import running_app

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "kcoord"
DOCS = [ROOT / "README.md", ROOT / "docs" / "limits.md"]

CLIENT_CONFIGS = frozenset(
    {"group.protocol", "group.remote.assignor", "bootstrap.servers", "group.id", "auto.offset.reset"}
)
"""Client properties the docs name (a client's config, not the server's)."""

FILE_SUFFIXES = (".json", ".jsonl", ".toml", ".md", ".yml", ".py", ".sh")
FILE_SUFFIXES += (".pem", ".key", ".crt", ".csr", ".ext", ".properties", ".log", ".pid")
"""Files the docs name: kcoord's own, and the walk-throughs' keys, certificates and client configs."""

CLIENT_CODE = frozenset({"message.value"})
"""Attributes the docs' client snippets read (kafka-python's ``ConsumerRecord.value``)."""

KERNEL_SETTINGS = frozenset({"net.core.somaxconn"})
"""Linux sysctls the docs name (the cap on ``socket.listen.backlog.size``)."""

_DOTTED = re.compile(r"(?<![\w./:-])([a-z][a-z0-9]*(?:\.[a-z0-9-]+)+)(?![\w.(/-])")


def _code(text: str) -> list[str]:
    """Every inline code span and fenced block of a Markdown text."""
    fenced = [
        re.sub(r"(^|\s)#.*$", "", block, flags=re.M)  # shell comments are prose
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    ]
    without_fences = re.sub(r"```.*?```", "", text, flags=re.S)
    return fenced + re.findall(r"`([^`\n]+)`", without_fences)


def _source_strings() -> str:
    return "\n".join(path.read_text() for path in SOURCE.rglob("*.py"))


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_every_dotted_name_in_code_is_a_setting_or_says_what_else_it_is(doc: Path) -> None:
    """A dotted name in code is a setting, a topic or group config, a client property, a file, or a
    log event the source emits; nothing else, so a renamed or invented setting fails here."""
    source = _source_strings()
    unknown = set()
    for code in _code(doc.read_text()):
        for name in _DOTTED.findall(code):
            if (
                name in BY_NAME
                or name in TOPIC_CONFIGS
                or name in GROUP_CONFIG_NAMES
                or name in CLIENT_CONFIGS
                or name in CLIENT_CODE
                or name in KERNEL_SETTINGS
                or name.endswith(FILE_SUFFIXES)
                or f'"{name}"' in source
                or name.startswith("kcoord.security.")
            ):
                continue
            unknown.add(name)
    assert unknown == set()


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_every_set_flag_and_environment_variable_names_a_setting(doc: Path) -> None:
    """``--set NAME=`` and ``KCOORD_NAME`` in the docs name settings (or documented non-settings)."""
    text = doc.read_text()
    flags = {name for name in re.findall(r"--set ([A-Za-z][\w.-]*)=", text) if name != "NAME"}
    assert flags - set(BY_NAME) == set()
    settings_env = {env_name(name) for name in BY_NAME}
    variables = set(re.findall(r"\bKCOORD_[A-Z0-9_]*[A-Z0-9]\b", text))
    strays = {
        v
        for v in variables
        if v not in settings_env and v not in NOT_SETTINGS and not v.startswith(NOT_SETTINGS_PREFIXES)
    }
    assert strays == set()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_every_command_the_readme_shows_exists() -> None:
    """``kcoord CMD [SUB]`` in the README's code is a command of the CLI parser, and SUB one of its
    subcommands when it has any."""
    commands = _subcommands(_parser())
    shown: set[tuple[str, str]] = set()
    for code in _code((ROOT / "README.md").read_text()):
        shown.update(re.findall(r"(?:^|[\s/`])kcoord ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", code))
    assert len(shown) > 10
    wrong = []
    for command, sub in sorted(shown):
        if command not in commands:
            wrong.append(f"kcoord {command}")
            continue
        subcommands = _subcommands(commands[command])
        if subcommands and sub not in subcommands:
            wrong.append(f"kcoord {command} {sub}")
    assert wrong == []


def test_the_dynamic_broker_configs_the_readme_lists_are_the_code_s() -> None:
    """The README's list of broker configs that change at run time is exactly the code's."""
    text = (ROOT / "README.md").read_text()
    listed = re.search(r"the broker's dynamic ones \(([^)]*)\)", text)
    assert listed is not None
    assert set(re.findall(r"`([a-z.]+)`", listed.group(1))) == DYNAMIC_BROKER_CONFIGS


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
async def test_every_metric_the_docs_name_is_registered(doc: Path, tmp_path: Path) -> None:
    """Each ``kcoord_*`` metric the doc names (a trailing ``*`` meaning a family prefix) is in the
    registry of a started server."""
    named = set(re.findall(r"kcoord_[a-z0-9_]+\*?", await asyncio.to_thread(doc.read_text)))
    assert named
    async with running_app(tmp_path) as (app, _port):
        registered = set()
        for family in app.metrics.registry.collect():
            registered.add(family.name)
            registered.update(sample.name for sample in family.samples)
            if family.type == "counter":
                registered.add(f"{family.name}_total")
    missing = {
        name
        for name in named
        if not (
            any(r.startswith(name[:-1]) for r in registered) if name.endswith("*") else name in registered
        )
    }
    assert missing == set()
