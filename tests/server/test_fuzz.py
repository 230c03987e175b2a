"""Fuzzed requests for every advertised API version against a real server, with a bystander watching.

Hypothesis draws random bodies behind valid headers and structured frames (schema-valid requests,
and valid requests with a length bomb spliced in, bytes flipped, cut short or extended). Each goes
on a fresh loopback connection. Whatever the frame, the server must stay up, answer or close, keep
its memory bounded and log no traceback, while a bystander connection keeps getting answers.
The module runs in well under a minute (bounded example counts; each wait is 50 ms at most).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fuzz_frames import advertised, fuzz_frame
from tests.support.fuzz_run import Bystander, FuzzStats, api_name, rss_bytes, send_one
from tests.support.hostile_frames import request_frame
from tests.support.server import KcoordProcess

ADVERTISED = advertised()
WAIT_S = 0.05
RSS_GROWTH_LIMIT = 150 * 1024 * 1024
BYSTANDER_WORST_LIMIT_S = 2.0
FUZZ_SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
    database=None,
)


class Watch:
    """The server under fuzz, its starting RSS, the bystander, and what the fuzzing saw."""

    def __init__(self, server: KcoordProcess, bystander: Bystander) -> None:
        assert server.proc is not None
        self.server = server
        self.pid = server.proc.pid
        self.rss_start = rss_bytes(self.pid)
        self.bystander = bystander
        self.stats = FuzzStats()

    def send(self, api_key: int, version: int, frame: bytes) -> None:
        result = send_one(self.server.host, self.server.port, frame, WAIT_S)
        self.stats.outcome(api_name(api_key, version), result)
        self.assert_healthy()

    def assert_healthy(self) -> None:
        assert self.server.proc is not None and self.server.proc.poll() is None, "the server died"
        assert self.bystander.failure is None, f"the bystander failed: {self.bystander.failure!r}"
        tracebacks = [line for line in self.server.raw_log if "Traceback" in line]
        assert not tracebacks, tracebacks[-1][:3000]


@pytest.fixture(scope="module")
def watch(shared_kcoord: KcoordProcess) -> Iterator[Watch]:
    with Bystander(shared_kcoord.host, shared_kcoord.port) as bystander:
        yield Watch(shared_kcoord, bystander)


@settings(FUZZ_SETTINGS, max_examples=2000)
@given(target=st.sampled_from(ADVERTISED), body=st.binary(max_size=48))
def test_random_bodies(watch: Watch, target: tuple[int, int], body: bytes) -> None:
    """Random bytes after a valid header of any advertised version: answered or closed, never fatal."""
    api_key, version = target
    watch.send(api_key, version, request_frame(api_key, version, body))


@settings(FUZZ_SETTINGS, max_examples=3000)
@given(target=st.sampled_from(ADVERTISED), rng=st.randoms(use_true_random=False))
def test_structured_frames(watch: Watch, target: tuple[int, int], rng: random.Random) -> None:
    """Valid requests and mutations of them (length bombs, flipped bytes, cuts, extra bytes)."""
    api_key, version = target
    watch.send(api_key, version, fuzz_frame(api_key, version, rng))


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED)
def test_every_version_gets_its_share(watch: Watch, api_key: int, version: int) -> None:
    """Every advertised version gets twelve structured frames of its own, whatever hypothesis picked."""
    rng = random.Random(api_key * 1000 + version)
    for _ in range(12):
        watch.send(api_key, version, fuzz_frame(api_key, version, rng))


def test_the_server_came_through(watch: Watch) -> None:
    """After all of it (and a second for short timers the fuzz armed): up, memory bounded, no error
    logged, and the bystander answered throughout and quickly enough."""
    time.sleep(1)
    watch.assert_healthy()
    assert watch.stats.sent > 3000
    assert watch.stats.closed and watch.stats.answered, "both answers and closes were seen"
    growth = rss_bytes(watch.pid) - watch.rss_start
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew {growth / 2**20:.0f} MB"
    assert watch.bystander.rounds > 10
    assert watch.bystander.worst_s < BYSTANDER_WORST_LIMIT_S, (
        f"bystander worst {watch.bystander.worst_s:.3f}s"
    )
    errors = [e for e in watch.server.logs if e.get("level") == "error"]
    assert not errors, errors[-1]
