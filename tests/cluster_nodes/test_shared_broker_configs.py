"""Dynamic broker configs in a cluster of two nodes over one real PostgreSQL: the cluster default set
through one node reaches the other within a renewal, a node's own value stays on that node, and
both survive a restart of every node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.cluster_nodes import call, start_nodes, wait_until
from tests.support.postgres import PostgresCluster
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

BOUND_S = 5.0
"""How long a change may take to reach every node here (renewal interval 1 s, plus a loaded CI)."""
RESOURCE_BROKER = 4
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3


def _alter(node: KcoordProcess, resource: str, configs: dict[str, str]) -> int:
    body = {
        "resources": [
            {
                "resource_type": RESOURCE_BROKER,
                "resource_name": resource,
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "validate_only": False,
    }
    return int(call(node, ApiKey.ALTER_CONFIGS, 2, body).responses[0].error_code)


def _described(node: KcoordProcess, key: str) -> tuple[Any, int]:
    body = {
        "resources": [
            {
                "resource_type": RESOURCE_BROKER,
                "resource_name": node.settings["node.id"],
                "configuration_keys": [key],
            }
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    (result,) = call(node, ApiKey.DESCRIBE_CONFIGS, 4, body).results
    (entry,) = result.configs
    return entry.value, int(entry.config_source)


@pytest.mark.slow
def test_broker_configs_are_shared_by_the_nodes_and_kept(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """AlterConfigs of the cluster default through node 1 reaches node 2 as
    DYNAMIC_DEFAULT_BROKER_CONFIG within a renewal; node 2's own value is DYNAMIC_BROKER_CONFIG there
    and not on node 1; after both nodes restart each describes what it had."""
    database = postgres_cluster.create_database()
    one, two = start_nodes(kcoord_factory, tmp_path, database, 2)
    assert _alter(one, "", {"log.retention.ms": "3600000"}) == ErrorCode.none
    assert _alter(two, "2", {"message.max.bytes": "5000"}) == ErrorCode.none
    wait_until(
        lambda: _described(two, "log.retention.ms") == ("3600000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        BOUND_S,
        "node 2 applies the cluster default set through node 1",
    )
    assert _described(one, "message.max.bytes")[1] != DYNAMIC_BROKER_CONFIG

    for node in (one, two):
        node.restart()
    assert _described(one, "log.retention.ms") == ("3600000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert _described(two, "message.max.bytes") == ("5000", DYNAMIC_BROKER_CONFIG)
