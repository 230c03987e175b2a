"""Reads the repository's container files: the Dockerfile's instructions, compose (through the compose CLI),
YAML (through the tools virtualenv's PyYAML) and the metrics contract table.

The tools come from ``scripts/container-tools.sh`` (PyPI packages in their own virtualenv), so the
suite's own environment needs neither PyYAML nor a Docker engine.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
COMPOSE_FILE = REPO / "docker-compose.yml"
DEPLOY = REPO / "deploy"
METRICS_CONTRACT = DEPLOY / "metrics-contract.md"
TOOLS_SCRIPT = REPO / "scripts" / "container-tools.sh"


@functools.cache
def tools_venv() -> Path:
    """The virtualenv holding hadolint, docker-compose and PyYAML (installed on first use)."""
    done = subprocess.run(
        ["bash", str(TOOLS_SCRIPT)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{TOOLS_SCRIPT} failed:\n{done.stderr}"
    return Path(done.stdout.strip().splitlines()[-1])


def tool(name: str) -> str:
    path = tools_venv() / "bin" / name
    assert path.exists(), f"{path} missing after {TOOLS_SCRIPT}"
    return str(path)


def load_yaml(path: Path) -> Any:
    """Parse a YAML file with the tools virtualenv's PyYAML (the document comes back through JSON)."""
    code = "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)"
    done = subprocess.run(
        [tool("python"), "-c", code, str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"{path}: {done.stderr}"
    return json.loads(done.stdout)


def compose_config(*profiles: str) -> dict[str, Any]:
    """``docker-compose config --format json``: the compose file as compose validates and normalises it
    (with ``profiles`` active)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KCOORD_", "COMPOSE_"))}
    profile_flags = [flag for profile in profiles for flag in ("--profile", profile)]
    done = subprocess.run(
        [tool("docker-compose"), "-f", str(COMPOSE_FILE), *profile_flags, "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, f"docker-compose config failed:\n{done.stderr}"
    config: dict[str, Any] = json.loads(done.stdout)
    return config


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[Instruction]:
    """Logical Dockerfile instructions: comments dropped, backslash continuations joined."""
    instructions: list[Instruction] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        keyword, _, args = text.partition(" ")
        instructions.append(Instruction(keyword.upper(), " ".join(args.split())))
    return instructions


def dockerfile_final_stage() -> list[Instruction]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, ins in enumerate(instructions) if ins.keyword == "FROM")
    return instructions[last_from:]


def dockerfile_env(instructions: list[Instruction]) -> dict[str, str]:
    """ENV ``K=V`` pairs (the modern form) of the given instructions, later ones winning."""
    env: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "ENV":
            for token in shlex.split(ins.args):
                name, sep, value = token.partition("=")
                assert sep, f"ENV {ins.args!r}: use the NAME=VALUE form"
                env[name] = value
    return env


def dockerfile_json_args(instructions: list[Instruction], keyword: str) -> list[str]:
    """The exec-form (JSON array) arguments of the last ``keyword`` instruction."""
    found = [ins for ins in instructions if ins.keyword == keyword]
    assert found, f"no {keyword} in the Dockerfile"
    value: list[str] = json.loads(found[-1].args)
    return value


def healthcheck_command(instructions: list[Instruction]) -> list[str]:
    found = [ins for ins in instructions if ins.keyword == "HEALTHCHECK"]
    assert found, "no HEALTHCHECK in the Dockerfile"
    _, sep, command = found[-1].args.partition("CMD ")
    assert sep, "HEALTHCHECK must use CMD"
    value: list[str] = json.loads(command)
    return value


def effective_settings(env: dict[str, str], args: list[str] | None = None) -> dict[str, str]:
    """What ``kcoord config show`` reports for this environment and these ``serve`` flags."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
    done = subprocess.run(
        [sys.executable, "-m", "kcoord", "config", "show", *(args or [])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**clean, **env},
    )
    assert done.returncode == 0, f"kcoord config show rejected {env} {args}: {done.stderr}"
    settings: dict[str, str] = {}
    for line in done.stdout.splitlines():
        name, sep, rest = line.partition(" = ")
        if sep:
            settings[name] = rest.split("    # ", 1)[0]
    return settings


def port_of(host_port: str) -> int:
    return int(host_port.rpartition(":")[2])


@dataclass(frozen=True)
class ContractMetric:
    name: str
    type: str
    labels: frozenset[str]


_ROW = re.compile(r"^\|\s*(kcoord_\w+)\s*\|\s*(\w+)\s*\|([^|]*)\|")


def metrics_contract() -> dict[str, ContractMetric]:
    """The metric table of ``deploy/metrics-contract.md`` by metric name."""
    metrics: dict[str, ContractMetric] = {}
    for line in METRICS_CONTRACT.read_text().splitlines():
        match = _ROW.match(line)
        if match:
            labels = frozenset(x.strip() for x in match.group(3).split(",") if x.strip())
            metrics[match.group(1)] = ContractMetric(match.group(1), match.group(2), labels)
    assert metrics, f"no metric rows in {METRICS_CONTRACT}"
    return metrics
