"""Group members with the clients' DEFAULT timings, for failover and partition-growth tests.

The group harness in :mod:`tests.support.group_clients` runs members with a 1 s heartbeat and a
6 s session, which hides how long failover takes with what users actually run. Here members
keep the client defaults (session.timeout.ms 45000, heartbeat.interval.ms 3000, and the default
metadata.max.age.ms, which the driver never sets) unless a test says otherwise, and may
bootstrap through another address (a :class:`~tests.support.tcp_proxy.TcpProxy`). The members
are the same drivers (tests/groups/consumer_driver.py) and the same :class:`Driver` objects.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from tests.support.group_clients import PYTHON_DRIVER, ClientKind, Driver, Group
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess

CLIENT_SESSION_TIMEOUT_MS = 45_000
CLIENT_HEARTBEAT_MS = 3_000
CREATE_PARTITIONS, CREATE_PARTITIONS_VERSION = 37, 1


class DefaultTimingGroup(Group):
    """A :class:`Group` whose Python-client members run with the clients' default timings."""

    def __init__(
        self,
        server: KcoordProcess,
        topic: str,
        group: str,
        partitions: int,
        *,
        bootstrap: str | None = None,
        heartbeat_ms: int = CLIENT_HEARTBEAT_MS,
    ) -> None:
        super().__init__(server, topic, group, partitions)
        self.bootstrap = bootstrap or server.bootstrap
        self.heartbeat_ms = heartbeat_ms

    def start(
        self,
        kind: ClientKind,
        *,
        session_timeout_ms: int = CLIENT_SESSION_TIMEOUT_MS,
        instance_id: str | None = None,
    ) -> Driver:
        assert kind.client in ("kafka-python", "confluent", "aiokafka"), kind
        self._numbers += 1
        name = f"{kind.name}-{self._numbers}"
        command = [
            sys.executable,
            str(PYTHON_DRIVER),
            "--client",
            kind.client,
            "--assignor",
            kind.assignor,
            "--bootstrap",
            self.bootstrap,
            "--topic",
            self.topic,
            "--group",
            self.group,
            "--session-timeout-ms",
            str(session_timeout_ms),
            "--heartbeat-ms",
            str(self.heartbeat_ms),
            "--client-id",
            name,
        ]
        if instance_id:
            command += ["--instance-id", instance_id]
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        driver = Driver(name, kind, proc)
        driver.start_readers()
        self.drivers.append(driver)
        return driver

    def owned(self) -> set[int]:
        """Every partition some live member holds now."""
        return {p for d in self.live for p in d.assignment or ()}

    def all_owned_at(self, partitions: Iterable[int], since: float) -> float:
        """When the last of ``partitions`` was first reported owned by some member after ``since``."""
        return max(self.first_assigned_at(p, since) for p in partitions)

    def first_assigned_at(self, partition: int, since: float = 0.0) -> float:
        """When a member first reported owning ``partition`` (after ``since``)."""
        return min(
            float(e["at"])
            for d in self.drivers
            for e in d.of_kind("assigned", since=since)
            if partition in e["partitions"]
        )

    def rebalances(self) -> list[dict[str, Any]]:
        """The server's ``rebalance.preparing`` log lines for this group, oldest first."""
        return [e for e in self.server.events("rebalance.preparing") if e.get("group") == self.group]

    def view(self) -> dict[str, Any]:
        """The group as kcoord's HTTP endpoint shows it: state, generation, members, history."""
        return group_view(self.server, self.group)


def group_view(server: KcoordProcess, group: str) -> dict[str, Any]:
    """``GET /v1/groups/<group>`` on the server's metrics/HTTP listener."""
    url = f"http://{server.metrics_address}/v1/groups/{quote(group, safe='')}"
    with urllib.request.urlopen(url, timeout=10) as reply:
        view: dict[str, Any] = json.load(reply)
    return view


def create_partitions(server: KcoordProcess, topic: str, count: int) -> int:
    """CreatePartitions v1 growing ``topic`` to ``count`` partitions; returns the error code."""
    with RawClient(server.host, server.port, client_id="failover-test-admin") as raw:
        response = raw.call(
            CREATE_PARTITIONS,
            CREATE_PARTITIONS_VERSION,
            {
                "topics": [{"name": topic, "count": count, "assignments": None}],
                "timeout": 10_000,
                "validate_only": False,
            },
        )
    return int(response.results[0].error_code)
