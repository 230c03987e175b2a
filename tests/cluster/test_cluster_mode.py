"""ClusterMode: the one decision, from the settings and the store, of alone or one of a cluster."""

from __future__ import annotations

import pytest

from kcoord.cluster.membership import LeaseSettings
from kcoord.cluster.mode import ClusterMode
from kcoord.storage import LogConfig
from kcoord.storage.memory import MemoryLogStore
from kcoord.storage.postgres import PostgresLogStore
from kcoord.storage.postgres.hold import HoldMode
from tests.apis.broker.topic_app import make_settings


def test_a_node_alone_has_no_shared_store() -> None:
    """Without kcoord.cluster.enable the mode is off and asking for the shared store is an error."""
    mode = ClusterMode.of(make_settings(), MemoryLogStore(LogConfig()), 3)
    assert not mode.enabled and mode.store is None and mode.node_id == 3
    with pytest.raises(RuntimeError):
        mode.shared_store  # noqa: B018


def test_a_cluster_needs_a_store_other_nodes_can_share() -> None:
    """kcoord.cluster.enable over a store that is not PostgreSQL refuses to build the node."""
    with pytest.raises(ValueError, match="postgresql://"):
        ClusterMode.of(make_settings(kcoord_cluster_enable=True), MemoryLogStore(LogConfig()), 1)


def test_a_cluster_node_carries_its_store_lease_and_staleness() -> None:
    """In a cluster the mode holds the shared store and the lease and staleness settings."""
    settings = make_settings(
        kcoord_cluster_enable=True,
        kcoord_node_lease_ms=9000,
        kcoord_node_lease_renew_ms=500,
        kcoord_cluster_state_max_staleness_ms=7000,
    )
    store = PostgresLogStore("postgresql://127.0.0.1:1/unused", LogConfig(), hold=HoldMode.SHARED)
    mode = ClusterMode.of(settings, store, 2)
    assert mode.enabled and mode.shared_store is store
    assert mode.lease == LeaseSettings(lease_ms=9000, renew_ms=500)
    assert mode.max_staleness_ms == 7000
