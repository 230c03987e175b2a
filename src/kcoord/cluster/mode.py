"""Whether this node serves alone or as one of a cluster: one object, built once by the app.

``kcoord.cluster.enable`` makes a node one of several over one PostgreSQL database. What that
changes is decided from a :class:`ClusterMode` handed to the parts that care (the topic catalogue,
producer state, the security documents, the membership), rather than each part checking the
setting or the store's type: :attr:`ClusterMode.store` is the shared store (None alone), and
:attr:`ClusterMode.lease` the membership's lease timings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcoord.cluster.membership import LeaseSettings
from kcoord.config import Settings
from kcoord.storage.api import LogStore
from kcoord.storage.postgres.store import PostgresLogStore

__all__ = ["ClusterMode"]


@dataclass(frozen=True, slots=True)
class ClusterMode:
    node_id: int
    store: PostgresLogStore | None = None
    """The store every node of the cluster shares; None for a node alone."""
    lease: LeaseSettings = field(default_factory=LeaseSettings)
    max_staleness_ms: int = 0
    """How long shared state polled from the database may be served without a fresh read."""

    @property
    def enabled(self) -> bool:
        return self.store is not None

    @property
    def shared_store(self) -> PostgresLogStore:
        """The shared store; only in a cluster."""
        if self.store is None:
            raise RuntimeError("this node is not in a cluster")
        return self.store

    @classmethod
    def of(cls, settings: Settings, store: LogStore, node_id: int) -> ClusterMode:
        """The mode ``settings`` ask for, over ``store``; ValueError when a cluster is asked for over
        a store other nodes cannot share."""
        if not settings["kcoord.cluster.enable"]:
            return cls(node_id)
        if not isinstance(store, PostgresLogStore):
            raise ValueError("kcoord.cluster.enable needs a postgresql:// kcoord.storage.url")
        lease = LeaseSettings(
            lease_ms=settings["kcoord.node.lease.ms"], renew_ms=settings["kcoord.node.lease.renew.ms"]
        )
        return cls(node_id, store, lease, settings["kcoord.cluster.state.max.staleness.ms"])
