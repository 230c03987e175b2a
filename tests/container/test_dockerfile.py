"""The Dockerfile lints clean and its defaults agree with the CLI's settings."""

from __future__ import annotations

import subprocess

from kcoord.config import DEFINITIONS, env_name
from tests.container.files import (
    DOCKERFILE,
    dockerfile_env,
    dockerfile_final_stage,
    dockerfile_instructions,
    dockerfile_json_args,
    effective_settings,
    healthcheck_command,
    port_of,
    tool,
)

SETTING_ENV_NAMES = {env_name(d.name) for d in DEFINITIONS}


def test_hadolint_passes_at_warning_threshold() -> None:
    """hadolint reports nothing at warning level or above for the Dockerfile."""
    done = subprocess.run(
        [tool("hadolint"), "--failure-threshold", "warning", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_base_image_is_an_argument_used_by_every_stage() -> None:
    """``ARG BASE`` comes before the first FROM, and both stages start from ``${BASE}``."""
    instructions = dockerfile_instructions()
    assert instructions[0].keyword == "ARG"
    assert instructions[0].args.startswith("BASE=")
    froms = [ins.args.split()[0] for ins in instructions if ins.keyword == "FROM"]
    assert len(froms) >= 2, "expected a builder and a runtime stage"
    assert set(froms) == {"${BASE}"}


def test_image_environment_names_real_settings() -> None:
    """Every KCOORD_ variable the image sets is the environment name of a defined setting."""
    env = dockerfile_env(dockerfile_final_stage())
    kcoord_vars = {name for name in env if name.startswith("KCOORD_")}
    assert kcoord_vars, "the image should set its listen addresses and data dir through KCOORD_ variables"
    assert kcoord_vars <= SETTING_ENV_NAMES, kcoord_vars - SETTING_ENV_NAMES


def test_image_defaults_listen_on_all_interfaces_at_exposed_ports() -> None:
    """Under the image's environment, the Kafka and metrics listeners bind 0.0.0.0 on the EXPOSEd ports."""
    stage = dockerfile_final_stage()
    env = {k: v for k, v in dockerfile_env(stage).items() if k.startswith("KCOORD_")}
    settings = effective_settings(env, dockerfile_json_args(stage, "CMD")[2:])
    exposed = {int(p.split("/")[0]) for ins in stage if ins.keyword == "EXPOSE" for p in ins.args.split()}
    assert settings["listeners"].startswith("PLAINTEXT://0.0.0.0:")
    assert settings["kcoord.metrics.listen"].startswith("0.0.0.0:")
    assert exposed == {port_of(settings["listeners"]), port_of(settings["kcoord.metrics.listen"])}


def test_data_directory_is_the_volume() -> None:
    """log.dirs under the image's environment is the declared VOLUME, and the image runs ``kcoord serve``."""
    stage = dockerfile_final_stage()
    env = {k: v for k, v in dockerfile_env(stage).items() if k.startswith("KCOORD_")}
    settings = effective_settings(env)
    assert dockerfile_json_args(stage, "VOLUME") == [settings["log.dirs"]]
    assert dockerfile_json_args(stage, "CMD")[:2] == ["kcoord", "serve"]


def test_image_runs_as_a_non_root_user() -> None:
    """The runtime stage switches to a numeric non-root user."""
    users = [ins.args for ins in dockerfile_final_stage() if ins.keyword == "USER"]
    assert users, "no USER in the runtime stage"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0


def test_healthcheck_asks_the_kafka_listener() -> None:
    """The HEALTHCHECK runs ``kcoord health`` against the image's Kafka port on loopback."""
    stage = dockerfile_final_stage()
    env = {k: v for k, v in dockerfile_env(stage).items() if k.startswith("KCOORD_")}
    command = healthcheck_command(stage)
    assert command[:2] == ["kcoord", "health"]
    bootstrap = command[command.index("--bootstrap") + 1]
    assert bootstrap == f"127.0.0.1:{port_of(effective_settings(env)['listeners'])}"
