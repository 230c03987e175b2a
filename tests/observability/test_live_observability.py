"""A real server and real kafka-python consumers: /metrics, /v1/groups and the ``kcoord groups`` CLI
report what the clients themselves see (members, assignments, committed offsets, lag)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.observability.live_group import (
    COMMITTED,
    MESSAGES_PER_PARTITION,
    PARTITIONS,
    PollingConsumer,
    assignments,
    commit_fixed_offsets,
    create_topic_with_messages,
    form,
    http_get_json,
    http_get_text,
)
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

GROUP = "obs-group"
TOPIC = "obs-topic"
LAG = MESSAGES_PER_PARTITION - COMMITTED


def kcoord_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kcoord", *args], capture_output=True, text=True, timeout=60, check=False
    )


def samples(exposition: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
    }


def test_metrics_views_and_cli_match_what_the_clients_see(kcoord: KcoordProcess) -> None:
    """Two consumers share a topic: metrics, JSON views and the CLI agree with their assignments and lag."""
    create_topic_with_messages(kcoord.bootstrap, TOPIC)
    consumers = [PollingConsumer(kcoord.bootstrap, GROUP, TOPIC, f"obs-{i}") for i in range(2)]
    try:
        consumers = form(kcoord, consumers)
        commit_fixed_offsets(consumers)
        owned = assignments(consumers)
        address = kcoord.metrics_address

        # 1. /metrics, parsed as Prometheus does.
        found = samples(http_get_text(address, "/metrics"))
        assert found[("kcoord_groups", (("protocol_type", "consumer"), ("state", "Stable")))] == 1
        assert found[("kcoord_group_members", (("protocol_type", "consumer"),))] == 2
        for partition in range(PARTITIONS):
            key = ("kcoord_consumer_lag", (("group", GROUP), ("partition", str(partition)), ("topic", TOPIC)))
            assert found[key] == LAG
        assert found[("kcoord_rebalances_total", (("trigger", "initial"),))] >= 1
        assert found[("kcoord_rebalance_duration_seconds_count", (("phase", "total"),))] >= 1
        assert found[("kcoord_offset_commits_total", ())] == PARTITIONS
        assert found[("kcoord_produce_bytes_total", ())] > 0
        assert found[("kcoord_connections_open", ())] >= 2
        requests = [labels for name, labels in found if name == "kcoord_requests_total"]
        assert any(("api", "SyncGroup") in labels for labels in requests)
        assert [name for name, _ in found if name.endswith("_created")] == []

        # 2. The JSON views.
        (summary,) = [g for g in http_get_json(address, "/v1/groups") if g["group"] == GROUP]
        assert (summary["state"], summary["members"], summary["protocol_type"]) == ("Stable", 2, "consumer")
        view = http_get_json(address, f"/v1/groups/{GROUP}")
        by_client = {m["client_id"]: m["assignment"] for m in view["members"]}
        seen = {client: {(t, p) for t, parts in a.items() for p in parts} for client, a in by_client.items()}
        assert seen == {client: {(tp.topic, tp.partition) for tp in tps} for client, tps in owned.items()}
        assert [(o["partition"], o["committed"], o["lag"]) for o in view["offsets"]] == [
            (p, COMMITTED, LAG) for p in range(PARTITIONS)
        ]
        assert view["history"][-1]["outcome"] == "stable"
        with pytest.raises(urllib.error.HTTPError) as missing:
            http_get_json(address, "/v1/groups/no-such-group")
        assert missing.value.code == 404

        # 3. The command line.
        listed = kcoord_cli("groups", "list", "--bootstrap", kcoord.bootstrap)
        assert listed.returncode == 0, listed.stderr
        assert any(line.split()[:3] == [GROUP, "consumer", "Stable"] for line in listed.stdout.splitlines())
        described = kcoord_cli("groups", "describe", GROUP, "--bootstrap", kcoord.bootstrap, "--json")
        assert described.returncode == 0, described.stderr
        rows = json.loads(described.stdout)["partitions"]
        assert {(r["partition"], r["current_offset"], r["log_end_offset"], r["lag"]) for r in rows} == {
            (p, COMMITTED, MESSAGES_PER_PARTITION, LAG) for p in range(PARTITIONS)
        }
        assert {(r["client_id"], r["partition"]) for r in rows} == {
            (client, tp.partition) for client, tps in owned.items() for tp in tps
        }
        table = kcoord_cli("groups", "describe", GROUP, "--bootstrap", kcoord.bootstrap)
        assert "LOG-END-OFFSET" in table.stdout and f"{TOPIC}  0" in table.stdout.replace("   ", "  ")
        history = kcoord_cli("groups", "history", GROUP, "--metrics", address)
        assert history.returncode == 0, history.stderr
        assert "initial" in history.stdout and "stable" in history.stdout
        assert kcoord_cli("groups", "history", "no-such-group", "--metrics", address).returncode == 1
    finally:
        for consumer in consumers:
            consumer.close()


def test_health_exits_zero_when_the_server_answers_and_one_when_not(kcoord: KcoordProcess) -> None:
    """``kcoord health`` reflects an ApiVersions round trip in its exit code."""
    assert kcoord_cli("health", "--bootstrap", kcoord.bootstrap).returncode == 0
    kcoord.kill()
    assert kcoord_cli("health", "--bootstrap", kcoord.bootstrap, "--timeout", "2").returncode == 1
