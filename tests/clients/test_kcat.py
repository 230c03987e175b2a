"""kcat (librdkafka 2.0.2) round trips: ``kcat -P`` with keys, headers and compression, ``kcat -C -e`` back.

kcat has no admin mode, so the topic is created over the raw protocol. It cannot set a timestamp
or a header per message: every message carries the same ``-H`` headers, and the CreateTime that
librdkafka stamps is checked to lie within the produce run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import replace

import pytest

from tests.support.clients import CODECS, PARTITIONS, Consumed, make_messages
from tests.support.raw_client import RawClient
from tests.support.raw_ops import create_topic
from tests.support.round_trip import assert_round_trip
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
HEADERS = (("origin", b"kcat"), ("run", b"round-trip"))


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def kcat_consume(bootstrap: str, topic: str) -> list[Consumed]:
    run = subprocess.run(
        [KCAT, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-q"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    received = []
    for line in run.stdout.splitlines():
        record = json.loads(line)
        flat = record.get("headers") or []
        received.append(
            Consumed(
                partition=record["partition"],
                offset=record["offset"],
                key=_bytes(record["key"]),
                value=_bytes(record["payload"]),
                headers=tuple((flat[i], _bytes(flat[i + 1])) for i in range(0, len(flat), 2)),
                timestamp_ms=record["ts"],
            )
        )
    return received


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(shared_kcoord: KcoordProcess, topic_name: str, codec: str) -> None:
    """10,000 keyed messages with headers from ``kcat -P`` come back from ``kcat -C`` once each, in order."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as raw:
        assert create_topic(raw, topic_name, PARTITIONS) == 0
    messages = [replace(m, headers=HEADERS) for m in make_messages("kcat")]
    lines = "".join(f"{m.key.decode()}\t{m.value.decode()}\n" for m in messages)
    command = [KCAT, "-P", "-b", shared_kcoord.bootstrap, "-t", topic_name, "-K", "\\t", "-z", codec]
    command += ["-X", "acks=all", "-X", "linger.ms=5"]
    for name, value in HEADERS:
        command += ["-H", f"{name}={value.decode()}"]
    started_ms = int(time.time() * 1000)
    produced = subprocess.run(command, input=lines, capture_output=True, text=True, timeout=60)
    finished_ms = int(time.time() * 1000)
    assert produced.returncode == 0, produced.stderr[-3000:]

    received = kcat_consume(shared_kcoord.bootstrap, topic_name)
    assert_round_trip(shared_kcoord, topic_name, codec, messages, received, check_timestamps=False)
    assert all(started_ms - 1000 <= r.timestamp_ms <= finished_ms + 1000 for r in received)
