"""kafka-python 2.0.2 round trips, run in its own virtualenv through tests/clients/kp2_round_trip.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.clients import (
    CODECS,
    Consumed,
    base_timestamp,
    make_messages,
)
from tests.support.round_trip import assert_round_trip
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

SCRIPT = Path(__file__).with_name("kp2_round_trip.py")
REPO_KP2_PYTHON = Path(__file__).resolve().parents[2] / ".venv-kp2" / "bin" / "python"


def kp2_python() -> str:
    """The interpreter with kafka-python 2.0.2: $KCOORD_KP2_PYTHON, else the repo's .venv-kp2."""
    configured = os.environ.get("KCOORD_KP2_PYTHON")
    if configured:
        return configured
    assert REPO_KP2_PYTHON.exists(), (
        "kafka-python 2.0.2 is not installed: run scripts/test.sh, or set KCOORD_KP2_PYTHON "
        "to a python with kafka-python==2.0.2 (and lz4, python-snappy, zstandard for the codecs)"
    )
    return str(REPO_KP2_PYTHON)


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("latin-1")


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(shared_kcoord: KcoordProcess, topic_name: str, codec: str) -> None:
    """10,000 keyed messages with headers from kafka-python 2.0.2 come back exactly once, in order, intact."""
    base_ts = base_timestamp()
    run = subprocess.run(
        [
            kp2_python(),
            str(SCRIPT),
            "--bootstrap",
            shared_kcoord.bootstrap,
            "--topic",
            topic_name,
            "--codec",
            codec,
            "--base-ts",
            str(base_ts),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert run.stdout.strip(), f"no output; exit {run.returncode}; stderr:\n{run.stderr[-3000:]}"
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert "error" not in result, result["error"]
    assert result["kafka_python"] == "2.0.2"
    received = [
        Consumed(
            partition=partition,
            offset=offset,
            key=_bytes(key),
            value=_bytes(value),
            headers=tuple((name, _bytes(header)) for name, header in headers),
            timestamp_ms=timestamp,
        )
        for partition, offset, key, value, headers, timestamp in result["received"]
    ]
    messages = make_messages("kafka-python-2", base_ts=base_ts)
    assert_round_trip(shared_kcoord, topic_name, codec, messages, received)
