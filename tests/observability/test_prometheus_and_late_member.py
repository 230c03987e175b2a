"""Issue 4 acceptance: a real Prometheus scrapes kcoord, and a late member is named and removed."""

from __future__ import annotations

import select
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.observability.live_group import (
    HEARTBEAT_MS,
    PARTITIONS,
    PollingConsumer,
    commit_fixed_offsets,
    create_topic_with_messages,
    form,
    http_get_json,
    http_get_text,
)
from tests.observability.stuck_consumer import SESSION_TIMEOUT_MS as STUCK_SESSION_MS
from tests.support import kafka_python_stall
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
WAIT_S = 60.0
STUCK_SCRIPT = Path(__file__).with_name("stuck_consumer.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_prometheus(tmp_path: Path, target: str) -> tuple[subprocess.Popen[bytes], str]:
    return launch_prometheus(
        tmp_path,
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: kcoord\n    static_configs:\n      - targets: ['{target}']\n",
    )


def launch_prometheus(tmp_path: Path, config_text: str) -> tuple[subprocess.Popen[bytes], str]:
    """Prometheus on a free loopback port with ``config_text`` as its configuration, and that address."""
    config = tmp_path / "prometheus.yml"
    config.write_text(config_text)
    address = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address={address}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, address


def query(address: str, expression: str) -> list[dict[str, Any]]:
    try:
        reply = http_get_json(address, "/api/v1/query?query=" + urllib.parse.quote(expression))
    except OSError:
        return []
    result: list[dict[str, Any]] = reply["data"]["result"]
    return result


def wait_for_series(address: str, expression: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        result = query(address, expression)
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"Prometheus never returned {expression!r}")


def test_prometheus_scrapes_rebalances_durations_and_lag(kcoord: KcoordProcess, tmp_path: Path) -> None:
    """Prometheus reads the rebalance counter, the duration histogram and lag; promtool finds no lint."""
    topic, group = "prom-topic", "prom-group"
    create_topic_with_messages(kcoord.bootstrap, topic)
    consumer = PollingConsumer(kcoord.bootstrap, group, topic, "prom-0")
    prometheus, address = start_prometheus(tmp_path, kcoord.metrics_address)
    try:
        (consumer,) = form(kcoord, [consumer])
        commit_fixed_offsets([consumer])
        rebalances = wait_for_series(address, 'kcoord_rebalances_total{trigger="initial"}')
        assert float(rebalances[0]["value"][1]) >= 1
        durations = wait_for_series(address, 'kcoord_rebalance_duration_seconds_count{phase="total"}')
        assert float(durations[0]["value"][1]) >= 1
        lag = wait_for_series(address, f'kcoord_consumer_lag{{group="{group}",topic="{topic}"}}')
        assert sorted(int(s["metric"]["partition"]) for s in lag) == list(range(PARTITIONS))
        assert {float(s["value"][1]) for s in lag} == {6.0}
        exposition = http_get_text(kcoord.metrics_address, "/metrics")
        lint = subprocess.run(
            [PROMTOOL, "check", "metrics"], input=exposition, capture_output=True, text=True, timeout=30
        )
        assert lint.returncode == 0 and lint.stdout.strip() == "" and lint.stderr.strip() == "", lint
    finally:
        consumer.close()
        prometheus.terminate()
        prometheus.wait(30)


def start_stuck(
    kcoord: KcoordProcess, group: str, topic: str, client_id: str, max_poll_ms: int
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(STUCK_SCRIPT), kcoord.bootstrap, group, topic, client_id, str(max_poll_ms)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def announced_assigned(member: subprocess.Popen[bytes]) -> bool:
    assert member.stdout is not None
    ready, _, _ = select.select([member.stdout], [], [], WAIT_S)
    return bool(ready) and member.stdout.readline().strip() == b"assigned"


def form_stuck(
    kcoord: KcoordProcess, group: str, topic: str, max_poll_ms: int, started: list[subprocess.Popen[bytes]]
) -> str:
    """Start the member to freeze and wait for its partitions; one hit by kafka-python's stall while
    the group forms is replaced once, only on the server's proof (``kafka_python_stall``). Returns
    the client id of the member that owns the partitions; every process started goes to ``started``."""
    kafka_python_stall.FORMED.append(group)
    started.append(start_stuck(kcoord, group, topic, "stuck", max_poll_ms))
    if announced_assigned(started[-1]):
        return "stuck"
    proof = kafka_python_stall.awaited_stall(
        kcoord, group, "stuck", session_timeout_ms=STUCK_SESSION_MS, heartbeat_ms=HEARTBEAT_MS
    )
    assert proof is not None, "the member never got partitions, and no kafka-python stall is proven"
    kafka_python_stall.RETRIES.append(f"{group}: {proof.describe()}")
    started[-1].kill()
    started.append(start_stuck(kcoord, group, topic, "stuck-again", max_poll_ms))
    assert announced_assigned(started[-1]), "the replaced member never got partitions"
    return "stuck-again"


def test_a_member_that_stops_polling_is_named_and_removed_at_the_rebalance_timeout(
    kcoord: KcoordProcess,
) -> None:
    """A frozen member does not rejoin: history and flag log name it removed after ~max.poll.interval.ms."""
    topic, group, max_poll_ms = "late-topic", "late-group", 3000
    create_topic_with_messages(kcoord.bootstrap, topic)
    started: list[subprocess.Popen[bytes]] = []
    joiner: PollingConsumer | None = None
    try:
        stuck_client = form_stuck(kcoord, group, topic, max_poll_ms, started)
        (stuck_member,) = [
            m["member_id"]
            for m in http_get_json(kcoord.metrics_address, f"/v1/groups/{group}")["members"]
            if m["client_id"] == stuck_client
        ]
        started[-1].send_signal(signal.SIGSTOP)
        joiner = PollingConsumer(kcoord.bootstrap, group, topic, "joiner", max_poll_interval_ms=max_poll_ms)
        (joiner,) = form(kcoord, [joiner])

        history = http_get_json(kcoord.metrics_address, f"/v1/groups/{group}")["history"]
        (late,) = [r for r in history if r["removed_not_rejoined"]]
        assert late["removed_not_rejoined"] == [stuck_member]
        assert late["trigger"] == "member_joined" and late["outcome"] == "stable"
        assert max_poll_ms - 100 <= late["join_ms"] <= max_poll_ms + 1500, late
        assert stuck_member in late["members_before"] and stuck_member not in late["members_after"]
        flagged = kcoord.wait_for_event("member.removed")
        assert (flagged["member"], flagged["cause"]) == (stuck_member, "not_rejoined")
        joined = [e for e in kcoord.events("rebalance.join_completed") if e["removed_not_rejoined"]]
        assert joined[-1]["removed_not_rejoined"] == [stuck_member]
        assert joined[-1]["duration_ms"] == late["join_ms"]
    finally:
        for member in started:
            member.kill()
            member.wait(10)
        if joiner is not None:
            joiner.close()
