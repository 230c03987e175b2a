"""This node's membership of a cluster over PostgreSQL: its lease, and the partitions it owns.

A loop renews the node's lease every ``renew_ms`` and then reconciles ownership: it reads the live
nodes and every partition's owner, computes the deterministic spread (:mod:`.assignment`), gives
up what is no longer this node's (stop serving first, then clear the owner in the database) and
claims what is (a new epoch, the log reopened fresh from the database, where the new leader epoch
starts recorded, then the host loads it).

Leases are kept on the database's clock, but the node decides whether it may still serve on its
own monotonic clock: a renewal sent at ``t`` lets it serve until ``t + lease_ms - renew_ms``, which
comes before the database lets any other node claim (the lease there starts later, when the
statement runs). When renewals fail (the database is unreachable, or the node was paused past its
lease) it stops serving at that local deadline and drops every partition; epoch fencing in the
commit round refuses any write that was still in flight.

A node id is one process at a time. Each process registers under a random incarnation
(:class:`~kcoord.storage.postgres.ownership.Ownership`). Starting, a process waits for a lease on
its id to lapse (a crashed predecessor's), but is refused (:class:`NodeIdInUseError`) as soon as it
sees that lease renewed: a live process holds the id. A process whose id another took over while
its own lease had lapsed (it was paused, say) finds its renewals refused and another incarnation
registered: it steps down, never registers again, and tells its owner (``on_displaced``), which
stops it. Its claims, releases and deregistration name its incarnation, so none of them can touch
what the id's new holder owns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from kcoord.cluster.assignment import assign
from kcoord.cluster.identity import BrokerAddress
from kcoord.protocol.errors import KafkaError
from kcoord.storage.api import PartitionLog
from kcoord.storage.holding import StoreHeldError
from kcoord.storage.postgres.ownership import (
    LiveNode,
    Ownership,
    OwnershipMove,
    PartitionOwner,
    Registration,
)

__all__ = [
    "ClusterMembership",
    "LeaseSettings",
    "LogOnlyHost",
    "MembershipDirectory",
    "MembershipObserver",
    "NodeIdInUseError",
    "PartitionHost",
]

log = structlog.get_logger(__name__)

PartitionKey = tuple[str, int]

STOP_STEP_TIMEOUT_S = 5.0
"""How long each step of a clean exit (ending the renewal loop, dropping the partitions, releasing
them in the database) may take before the exit goes on without it."""


class NodeIdInUseError(StoreHeldError):
    """Another live process holds this node id: it renewed its lease while this one waited."""


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    lease_ms: int = 6000
    """``kcoord.node.lease.ms``: how long a node stays live without renewing."""
    renew_ms: int = 1000
    """``kcoord.node.lease.renew.ms``: how often it renews (and re-reads the membership)."""
    register_timeout_ms: int = 60_000
    """How long start waits for this node id's previous lease (a crashed incarnation) to lapse."""


class PartitionHost(Protocol):
    """What serves the partitions this node owns (the group coordinator for ``__consumer_offsets``)."""

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None: ...

    async def release(self, partition: int) -> None: ...


class LogOnlyHost:
    """The host of a topic partition: serving it is having its fresh log in the store, which the
    claim reopened (and which reconciliation forgets once the partition is someone else's)."""

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None:
        return None

    async def release(self, partition: int) -> None:
        return None


class ReopeningStore(Protocol):
    async def reopen(self, topic: str, partition: int, owner_epoch: int) -> PartitionLog: ...

    async def forget(self, topic: str, partition: int) -> None: ...


class MembershipObserver(Protocol):
    def ownership_moved(self, topic: str, partition: int, change: str) -> None: ...

    def lease_lost(self) -> None: ...


class _NoObserver:
    def ownership_moved(self, topic: str, partition: int, change: str) -> None:
        return None

    def lease_lost(self) -> None:
        return None


class ClusterMembership:
    """Registers the node, keeps its lease, and keeps the host serving exactly what it owns."""

    def __init__(
        self,
        ownership: Ownership,
        store: ReopeningStore,
        node_id: int,
        advertised: Callable[[], tuple[str, int]],
        host_for: Callable[[str], PartitionHost],
        partitions: Callable[[], Sequence[PartitionKey]],
        settings: LeaseSettings = LeaseSettings(),
        *,
        observer: MembershipObserver | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        on_catalogue: Callable[[], Awaitable[None]] | None = None,
        on_displaced: Callable[[str], None] | None = None,
    ) -> None:
        self._ownership = ownership
        self._store = store
        self.node_id = node_id
        self._advertised = advertised
        self._host_for = host_for
        self.on_catalogue = on_catalogue
        """Called before each reconciliation, so the topic catalogue applies other nodes' changes
        and the spread covers the partitions of topics they created."""
        self._partitions = partitions
        self._settings = settings
        self._observer: MembershipObserver = observer or _NoObserver()
        self._monotonic = monotonic
        self._deadline = 0.0
        self._owned: dict[PartitionKey, int] = {}
        self._moves: dict[PartitionKey, list[OwnershipMove]] = {}
        self._task: asyncio.Task[None] | None = None
        self.live: list[LiveNode] = []
        """The live nodes as last read."""
        self.owners: dict[PartitionKey, PartitionOwner] = {}
        """Every partition's owner as last read."""
        self._view_changes = 0
        self.on_displaced = on_displaced
        """Called once another process has taken this node id over; the message says so."""
        self.displaced: str | None = None
        self._log = log.bind(node_id=node_id, incarnation=self.incarnation)

    # -- what the edge asks

    @property
    def incarnation(self) -> str:
        """This process's registration of the node id (random per process)."""
        return str(self._ownership.incarnation)

    def serving(self) -> bool:
        """Whether this node's lease is certainly still live (its own monotonic clock, with a margin)."""
        return self._monotonic() < self._deadline

    def view_version(self) -> tuple[int, bool]:
        """Changes whenever the live nodes, an owner, what this node serves or :meth:`serving` do."""
        return self._view_changes, self.serving()

    def owned(self) -> dict[PartitionKey, int]:
        """The partitions this node serves, with the epoch each writes under."""
        return dict(self._owned)

    def owner_of(self, topic: str, partition: int) -> LiveNode | None:
        """The live node that owns ``topic``-``partition`` as last read (None: no live owner yet)."""
        if (topic, partition) in self._owned and self.serving():
            return next((n for n in self.live if n.node_id == self.node_id), None) or LiveNode(
                self.node_id, *self._advertised()
            )
        owner = self.owners.get((topic, partition))
        if owner is None or owner.node_id is None or owner.node_id == self.node_id:
            return None
        return next((node for node in self.live if node.node_id == owner.node_id), None)

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch: the one this node writes under, else the owner's as last
        read (-1: never owned)."""
        if (topic, partition) in self._owned and self.serving():
            return self._owned[(topic, partition)]
        owner = self.owners.get((topic, partition))
        return -1 if owner is None or owner.epoch == 0 else owner.epoch

    def status(self) -> dict[str, Any]:
        """What ``/v1/cluster`` shows: this node, the live nodes, and every partition's owner."""
        partitions: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), owner in sorted(self.owners.items()):
            partitions.setdefault(topic, []).append(
                {"partition": partition, "owner": owner.node_id, "epoch": owner.epoch}
            )
        return {
            "node_id": self.node_id,
            "serving": self.serving(),
            "live_nodes": [{"node_id": n.node_id, "host": n.host, "port": n.port} for n in self.live],
            "owned": len(self._owned),
            "partitions": partitions,
        }

    def moves_of(self, topic: str, partition: int) -> list[dict[str, Any]]:
        """The recorded owner changes of a partition this node serves (read when it claimed it)."""
        if (topic, partition) not in self._owned:
            return []
        return [
            {
                "epoch": move.epoch,
                "node_id": move.node_id,
                "previous_node": move.previous_node,
                "moved_at_ms": move.moved_at_ms,
            }
            for move in self._moves.get((topic, partition), [])
        ]

    # -- lifecycle

    async def start(self) -> None:
        """Register (waiting for a previous incarnation's lease to lapse), claim a share, keep renewing."""
        host, port = self._advertised()
        deadline = self._monotonic() + self._settings.register_timeout_ms / 1000
        seen: Registration | None = None
        while True:
            sent = self._monotonic()
            try:
                if await self._ownership.register(self.node_id, host, port, self._settings.lease_ms):
                    break
                holder = await self._ownership.holder(self.node_id)
                if _renewed_since(seen, holder):
                    raise NodeIdInUseError(
                        f"node id {self.node_id} is held by another live kcoord process (it keeps"
                        " renewing its lease): give this node another node.id"
                    )
                seen = holder
                reason = "node id held by a live lease"
            except KafkaError as exc:
                reason = str(exc)
            if self._monotonic() > deadline:
                raise RuntimeError(f"node {self.node_id} could not register: {reason}")
            self._log.warning("cluster.register_waiting", reason=reason)
            await asyncio.sleep(self._settings.renew_ms / 1000)
        self._extend(sent)
        self._log.info("cluster.registered", host=host, port=port, lease_ms=self._settings.lease_ms)
        await self._reconcile_logged()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """A clean exit: stop serving, hand every partition back at once, leave the live set.

        Every step is bounded (:data:`STOP_STEP_TIMEOUT_S`): a slow or unreachable database, or
        a renewal stuck in a query, must not keep a SIGTERMed node alive. The partitions are
        dropped locally together (each host's release waits for its own in-flight appends), then
        released in the database in one transaction; if that cannot be done in time the lease
        lapses and the survivors take them over after it, as after a crash.
        """
        self._deadline = 0.0
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=STOP_STEP_TIMEOUT_S)
        drops = asyncio.gather(
            *(self._drop(key, release=False) for key in list(self._owned)), return_exceptions=True
        )
        try:
            await asyncio.wait_for(drops, STOP_STEP_TIMEOUT_S)
        except TimeoutError:
            self._log.warning("cluster.drop_timed_out", timeout_s=STOP_STEP_TIMEOUT_S)
        try:
            if await asyncio.wait_for(self._ownership.deregister(self.node_id), STOP_STEP_TIMEOUT_S):
                self._log.info("cluster.deregistered")
            else:
                self._log.info("cluster.deregister_skipped", reason="another process holds the node id")
        except (KafkaError, TimeoutError) as exc:
            self._log.warning("cluster.deregister_failed", error=str(exc) or type(exc).__name__)

    async def _run(self) -> None:
        while self.displaced is None:
            await asyncio.sleep(self._settings.renew_ms / 1000)
            await self.tick()

    async def tick(self) -> None:
        """One renewal and one reconciliation (the loop's step; tests call it directly)."""
        if self.displaced is not None:
            return
        sent = self._monotonic()
        try:
            remaining = max(0.05, self._deadline - sent)
            renewed = await asyncio.wait_for(
                self._ownership.renew(self.node_id, self._settings.lease_ms), remaining
            )
        except (KafkaError, TimeoutError) as exc:
            self._log.warning("cluster.renew_failed", error=str(exc) or type(exc).__name__)
            if not self.serving():
                await self._step_down("lease not renewed in time")
            return
        if not renewed:
            try:
                holder = await self._ownership.holder(self.node_id)
            except KafkaError as exc:
                self._log.warning("cluster.renew_failed", error=str(exc))
                await self._step_down("lease lapsed")
                return
            if holder is not None and holder.incarnation != self._ownership.incarnation:
                await self._displace(holder)
                return
            await self._step_down("lease lapsed")
            try:
                host, port = self._advertised()
                if not await self._ownership.register(self.node_id, host, port, self._settings.lease_ms):
                    return
            except KafkaError:
                return
            self._log.info("cluster.registered", host=host, port=port, again=True)
        if not self.serving() and self._owned:
            await self._step_down("local lease deadline passed before the renewal answered")
        self._extend(sent)
        await self._reconcile_logged()

    def _extend(self, sent: float) -> None:
        margin = self._settings.renew_ms
        self._deadline = sent + (self._settings.lease_ms - margin) / 1000

    async def _displace(self, holder: Registration) -> None:
        """Another process registered this node id while this one's lease had lapsed: step down for good."""
        message = (
            f"node id {self.node_id} was taken over by another kcoord process (incarnation"
            f" {holder.incarnation}) while this one's lease had lapsed; this process stops"
        )
        await self._step_down("node id taken over by another process")
        self.displaced = message
        self._log.warning("cluster.node_id_taken_over", holder=str(holder.incarnation), reason=message)
        if self.on_displaced is not None:
            self.on_displaced(message)

    async def _step_down(self, reason: str) -> None:
        self._deadline = 0.0
        if self._owned:
            self._log.warning("cluster.stepping_down", reason=reason, partitions=len(self._owned))
            self._observer.lease_lost()
        for key in list(self._owned):
            await self._drop(key, release=False)

    # -- ownership

    async def _reconcile_logged(self) -> None:
        try:
            await self.reconcile()
        except KafkaError as exc:
            self._log.warning("cluster.reconcile_failed", error=str(exc))

    async def reconcile(self) -> None:
        """Serve exactly the partitions the spread gives this node, claiming and releasing as needed."""
        live = await self._ownership.live_nodes()
        owners = {(o.topic, o.partition): o for o in await self._ownership.owners()}
        if live != self.live or owners != self.owners:
            self._view_changes += 1
        self.live, self.owners = live, owners
        if self.on_catalogue is not None:
            await self.on_catalogue()
        wanted = set(self._partitions()) & set(self.owners)
        desired = assign(sorted(wanted), [node.node_id for node in self.live])
        for key, epoch in list(self._owned.items()):
            recorded = self.owners.get(key)
            still_ours = recorded is not None and recorded.node_id == self.node_id and recorded.epoch == epoch
            if not still_ours:
                await self._drop(key, release=False, reason="fenced")
            elif desired.get(key) != self.node_id:
                await self._drop(key, release=True, reason="rebalanced to another node")
        for key in sorted(wanted):
            if desired.get(key) == self.node_id and key not in self._owned and self.serving():
                await self._claim(key)
            if key not in self._owned:
                await self._store.forget(*key)

    async def _claim(self, key: PartitionKey) -> None:
        topic, partition = key
        started = time.perf_counter()
        epoch = await self._ownership.claim(self.node_id, topic, partition)
        if epoch is None:
            return  # its owner's lease has not lapsed yet: the next round tries again
        previous = self.owners.get(key)
        partition_log = await self._store.reopen(topic, partition, epoch)
        await self._ownership.record_epoch_start(topic, partition, epoch, partition_log.log_end_offset)
        self._moves[key] = await self._ownership.moves(topic, partition)
        self._owned[key] = epoch
        self._view_changes += 1
        await self._host_for(topic).acquire(partition, partition_log)
        self._observer.ownership_moved(topic, partition, "acquired")
        self._log.info(
            "cluster.partition_acquired",
            topic=topic,
            partition=partition,
            epoch=epoch,
            previous_owner=previous.node_id if previous is not None else None,
            claim_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    async def _drop(self, key: PartitionKey, *, release: bool, reason: str = "stepping down") -> None:
        topic, partition = key
        epoch = self._owned.pop(key)
        self._view_changes += 1
        await self._host_for(topic).release(partition)
        if release:
            await self._ownership.release(self.node_id, topic, partition)
        self._observer.ownership_moved(topic, partition, "fenced" if reason == "fenced" else "released")
        self._log.info(
            "cluster.partition_released", topic=topic, partition=partition, epoch=epoch, reason=reason
        )


def _renewed_since(seen: Registration | None, now: Registration | None) -> bool:
    """Whether the same incarnation still holds the id, live, with a lease it extended meanwhile."""
    return (
        seen is not None
        and now is not None
        and now.live
        and now.incarnation == seen.incarnation
        and now.lease_expires_at_ms > seen.lease_expires_at_ms
    )


class CoordinatorPlacement(Protocol):
    """Where a coordinator keeps a key (a group id, ...): its topic and partition."""

    def placement(self, key: str) -> PartitionKey: ...


class MembershipDirectory:
    """Where clients go, as the membership last read it: live nodes, and each key's coordinator."""

    def __init__(
        self, membership: ClusterMembership, coordinators: Mapping[int, CoordinatorPlacement]
    ) -> None:
        self._membership = membership
        self._coordinators = coordinators
        """By FindCoordinator key type: the coordinator that places keys of that type."""

    def brokers(self) -> list[BrokerAddress]:
        return [(node.node_id, node.host, node.port) for node in self._membership.live]

    def coordinator(self, key_type: int, key: str) -> BrokerAddress | None:
        coordinator = self._coordinators.get(key_type)
        owner = None if coordinator is None else self._membership.owner_of(*coordinator.placement(key))
        return None if owner is None else (owner.node_id, owner.host, owner.port)

    def leader(self, topic: str, partition: int) -> int | None:
        owner = self._membership.owner_of(topic, partition)
        return None if owner is None else owner.node_id

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self._membership.leader_epoch(topic, partition)

    def version(self) -> tuple[int, bool]:
        return self._membership.view_version()
