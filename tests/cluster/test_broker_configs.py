"""Dynamic broker configs shared by two nodes over one real PostgreSQL: a change one node commits
is applied by the other on its next refresh (cluster default and per-node values), and neither
writes broker-configs.json."""

from __future__ import annotations

from pathlib import Path

import structlog.testing

from kcoord.cluster.broker_configs import BROKER_CONFIGS_FILE, DEFAULT_RESOURCE, BrokerConfigs
from kcoord.config import Settings
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.broker_configs import SharedBrokerConfigs
from tests.apis.broker.topic_app import make_settings


async def _node(
    store: PostgresLogStore, data_dir: Path, node_id: int
) -> tuple[BrokerConfigs, Settings, list[str]]:
    settings = make_settings()
    configs = BrokerConfigs(data_dir, settings, node_id)
    changed: list[str] = []
    configs.appliers.append(changed.extend)
    await configs.load(SharedBrokerConfigs(store.pool))
    return configs, settings, changed


async def test_a_change_on_one_node_reaches_the_other_on_refresh(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], tmp_path: Path
) -> None:
    """Node 1 sets the cluster default of log.retention.ms and its own max.connections; node 2
    applies the default (not node 1's own value) after a refresh, and a node restarting reads both
    from the database."""
    first, second = two_nodes
    one, one_settings, _ = await _node(first, tmp_path / "one", 1)
    two, two_settings, two_changed = await _node(second, tmp_path / "two", 2)

    await one.put(DEFAULT_RESOURCE, {"log.retention.ms": "60000"})
    await one.put("1", {"max.connections": "50"})
    assert (one_settings["log.retention.ms"], one_settings["max.connections"]) == (60000, 50)
    assert two_settings["log.retention.ms"] == 604800000

    await two.refresh()
    assert two_settings["log.retention.ms"] == 60000
    assert two_settings["max.connections"] == 2147483647
    assert two_changed == ["log.retention.ms"]

    again, again_settings, _ = await _node(first, tmp_path / "one", 1)
    assert again.of("1") == {"max.connections": "50"}
    assert (again_settings["log.retention.ms"], again_settings["max.connections"]) == (60000, 50)
    assert not (tmp_path / "one" / BROKER_CONFIGS_FILE).exists()


async def test_a_stored_value_that_cannot_apply_is_ignored_with_a_warning(
    two_nodes: tuple[PostgresLogStore, PostgresLogStore], tmp_path: Path
) -> None:
    """Rows written behind kcoord's back (a static setting, a bad number) are left out with a
    warning on refresh; the good row next to them applies."""
    first, second = two_nodes
    shared = SharedBrokerConfigs(first.pool)
    await shared.replace("", {"num.partitions": "3", "max.connections": "lots", "log.retention.ms": "1000"})
    with structlog.testing.capture_logs() as logs:
        configs, settings, _ = await _node(second, tmp_path, 2)
    assert configs.of("") == {"log.retention.ms": "1000"}
    assert (settings["num.partitions"], settings["max.connections"]) == (1, 2147483647)
    ignored = sorted(entry["config"] for entry in logs if entry["event"] == "broker.config_ignored")
    assert ignored == ["max.connections", "num.partitions"]
