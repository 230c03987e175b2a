"""Where one node's idempotent-producer state comes from and goes, alone or in a cluster.

- Alone: producer ids are reserved in the data directory, and every partition's state is rebuilt
  at start from the snapshot files and the logs (:class:`ProducerSnapshots`), then snapshotted
  there while running.
- In a cluster (``kcoord.cluster.enable``): ids are reserved from the database's counter, so no two
  nodes hand out the same id, and a partition's state lives on the node that owns it, rebuilt on
  claim from the snapshot kept in the database and dropped on release (:class:`ProducerHandover`).
  Until a partition's state is loaded its idempotent batches are refused with a retriable error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from kcoord.cluster.membership import PartitionHost
from kcoord.cluster.mode import ClusterMode
from kcoord.cluster.producer_handover import ProducerHandover
from kcoord.cluster.producer_ids import ID_BLOCK_FILE, FileIdReservations
from kcoord.cluster.producer_snapshots import ProducerSnapshots
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.storage.api import LogStore
from kcoord.storage.postgres.producer_ids import PostgresIdReservations
from kcoord.storage.postgres.producer_snapshots import PostgresProducerSnapshots
from kcoord.timer.api import Clock

__all__ = ["ProducerStateKeeper"]


class ProducerStateKeeper:
    """The node's :class:`ProducerStateManager`, fed and persisted as its mode needs."""

    def __init__(
        self,
        data_dir: Path,
        store: LogStore,
        *,
        cluster: ClusterMode,
        clock: Clock,
        internal_topics: Iterable[str] = (),
    ) -> None:
        self._data_dir = Path(data_dir)
        self._cluster = cluster
        self.producers = ProducerStateManager(self._data_dir, gated=cluster.enabled, clock=clock)
        self._snapshots = (
            None
            if cluster.enabled
            else ProducerSnapshots(self._data_dir, store, self.producers, internal_topics=internal_topics)
        )
        """Alone: the snapshot files the state is restored from and kept in."""
        self.handover: ProducerHandover | None = None
        """In a cluster, once started: the state of the partitions this node owns."""

    async def start(self) -> None:
        """Before the listener opens (after the store): restore (alone) or bind to the database."""
        if self._snapshots is not None:
            await self._snapshots.restore()
            self._snapshots.start()
            return
        store = self._cluster.shared_store
        floor = await asyncio.to_thread(FileIdReservations(self._data_dir / ID_BLOCK_FILE).reserved)
        self.producers.reserve_ids_from(PostgresIdReservations(store.pool, floor))
        self.handover = ProducerHandover(self.producers, PostgresProducerSnapshots(store.pool))
        self.handover.start()

    def host_for(self, topic: str) -> PartitionHost:
        """The membership's host for ``topic``'s partitions (only in a cluster, once started)."""
        if self.handover is None:
            raise RuntimeError("producer state is not clustered or not started")
        return self.handover.host_for(topic)

    async def stop(self) -> None:
        """Alone: write every partition's snapshot. In a cluster: stop the snapshot pass (the
        membership has dropped every partition by now)."""
        if self.handover is not None:
            await self.handover.stop()
        if self._snapshots is not None:
            await self._snapshots.stop()
