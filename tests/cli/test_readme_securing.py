"""The README's "Securing it" walk-through, run as written: every ``sh`` and ``python`` block of the
walk-through in order, in one empty directory, each block in its own shell or interpreter.

The only change is visible and minimal: the walk-through's ports (9093 for Kafka, 9644 for HTTP) become free
loopback ports, so the test can run beside others. The server the walk-through starts in the background is
stopped by its own last block (``kill``); should a block fail first, the test stops it by the pid the
walk-through wrote."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.observability.test_prometheus_and_late_member import free_port

pytestmark = pytest.mark.clients

README = Path(__file__).resolve().parents[2] / "README.md"
WALK_THROUGH = "### Walk-through: TLS, SCRAM users and ACLs on one machine"
PORTS = (9093, 9644)
BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def walk_through_blocks() -> list[tuple[str, str]]:
    """(language, code) of each fenced block from the walk-through's heading to the next heading."""
    text = README.read_text()
    start = text.index(WALK_THROUGH) + len(WALK_THROUGH)
    end = re.compile(r"^#{1,3} ", re.MULTILINE).search(text, start)
    section = text[start : end.start() if end else len(text)]
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(section)]


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """An empty directory; the walk-through's server is gone when the test ends."""
    yield tmp_path
    pid_file = tmp_path / "kcoord.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_the_securing_walk_through_runs_as_written(workdir: Path) -> None:
    """Every block of the walk-through exits 0: the keystore made with openssl, users added, a SASL_SSL
    listener with the authorizer, ACLs granted with ``kcoord --command-config``, confluent-kafka and
    kafka-python producing and consuming as ``app``, the operator tools reading the group, and ``app``
    refused a topic deletion. The server then stops cleanly with no error in its log."""
    blocks = walk_through_blocks()
    assert [language for language, _ in blocks].count("python") == 2
    moved = {port: free_port() for port in PORTS}
    print("ports moved for this run:", moved)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    outputs = []
    for language, code in blocks:
        for old, new in moved.items():
            code = code.replace(f":{old}", f":{new}")
        command = (
            ["bash", "-euo", "pipefail", "-c", code] if language == "sh" else [sys.executable, "-c", code]
        )
        done = subprocess.run(
            command, cwd=workdir, env=env, capture_output=True, text=True, timeout=180, check=False
        )
        assert done.returncode == 0, (
            f"{language} block failed:\n{code}\nstdout: {done.stdout}\nstderr: {done.stderr}"
        )
        outputs.append(done)
    confluent, kafka_python = (
        o.stdout.strip() for o, (language, _) in zip(outputs, blocks, strict=True) if language == "python"
    )
    assert confluent == str(sorted(f"confluent {i}" for i in range(3)))
    assert kafka_python == "[b'kafka-python']"
    tools = outputs[-1]
    assert "orders-app" in tools.stdout
    assert sorted(tools.stdout.splitlines()[-5:-1]) == sorted(
        ["kafka-python", *(f"confluent {i}" for i in range(3))]
    )
    assert "refused, as app's ACLs say" in tools.stdout
    assert "TOPIC_AUTHORIZATION_FAILED" in tools.stderr
    pid = int((workdir / "kcoord.pid").read_text())
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the walk-through's kill did not stop kcoord"
    log = [
        json.loads(line) for line in (workdir / "kcoord.log").read_text().splitlines() if line.startswith("{")
    ]
    events = [e["event"] for e in log]
    assert "kcoord.started" in events and events[-1] == "kcoord.stopped"
    assert not [e for e in log if e.get("level") in ("error", "critical")]
