"""DescribeCluster v0-2: this node as the only broker and the controller."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcoord.apis.access import OPERATIONS_OMITTED
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.security.acl import SUPPORTED_OPERATIONS, ResourceType
from kcoord.security.authorizer import operations_bits
from tests.apis.broker.topic_app import ADVERTISED, CLUSTER_ID, NODE_ID, call, open_app

CLUSTER_OPERATIONS = operations_bits(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])


@pytest.mark.parametrize("version", range(3))
async def test_lists_this_node_as_broker_and_controller(tmp_path: Path, version: int) -> None:
    """Every version names the cluster, this node as controller and as the one unfenced broker."""
    app = await open_app(tmp_path)
    body = {
        "include_cluster_authorized_operations": False,
        "endpoint_type": 1,
        "include_fenced_brokers": True,
    }
    response = await call(app, ApiKey.DESCRIBE_CLUSTER, version, body)
    assert response.error_code == ErrorCode.none
    assert (response.cluster_id, response.controller_id) == (CLUSTER_ID, NODE_ID)
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(NODE_ID, *ADVERTISED)]
    assert not getattr(response.brokers[0], "is_fenced", False)
    assert response.cluster_authorized_operations == OPERATIONS_OMITTED


async def test_authorized_operations_when_asked(tmp_path: Path) -> None:
    """Asking for the cluster's authorized operations reports every cluster operation."""
    app = await open_app(tmp_path)
    response = await call(app, ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
    assert response.cluster_authorized_operations == CLUSTER_OPERATIONS


async def test_controller_endpoint_request_is_mismatched(tmp_path: Path) -> None:
    """Asking a broker endpoint for controllers is MISMATCHED_ENDPOINT_TYPE, as from Kafka."""
    app = await open_app(tmp_path)
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 2}
    response = await call(app, ApiKey.DESCRIBE_CLUSTER, 1, body)
    assert response.error_code == ErrorCode.mismatched_endpoint_type and response.brokers == ()
