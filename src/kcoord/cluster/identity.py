"""The node id and cluster id, kept in ``meta.properties`` in the data directory.

Both are fixed the first time a data directory is used and read back on every later start,
so clients that cached the cluster id see the same cluster after a restart.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kcoord.storage.atomic_file import write_text_atomically

META_FILE = "meta.properties"


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    node_id: int
    cluster_id: str


BrokerAddress = tuple[int, str, int]
"""(node id, host, port) as Metadata, DescribeCluster and FindCoordinator give it."""


class NodeDirectory(Protocol):
    """The nodes of a cluster, for the APIs that tell clients where to go."""

    def brokers(self) -> list[BrokerAddress]:
        """Every live node, by id."""

    def coordinator(self, key_type: int, key: str) -> BrokerAddress | None:
        """The node coordinating ``key`` of FindCoordinator's ``key_type`` (None: no live owner yet,
        or no coordinator of that type; the client retries)."""

    def leader(self, topic: str, partition: int) -> int | None:
        """The node leading ``topic``-``partition`` (None: no live owner yet)."""

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch as Metadata reports it (-1: never led)."""

    def version(self) -> Hashable:
        """Changes whenever what :meth:`brokers`, :meth:`coordinator` or :meth:`leader` answer may
        (answers built from them are cached under it)."""


@dataclass(slots=True)
class Node:
    """This node as clients see it: its identity and the address it advertises.

    Two steps of the start complete it, each once: :meth:`bound` when the listeners have bound
    (the advertised addresses carry the ports actually bound, port 0 in tests; until then the
    configured one), and, in a cluster, :meth:`joined` (the cluster's id as the database holds it,
    and the directory of live nodes and owners). Alone, ``directory`` stays None: the node is every
    group's coordinator and the only broker.
    """

    node_id: int
    cluster_id: str
    advertised: tuple[str, int]
    directory: NodeDirectory | None = None
    listener_addresses: dict[str, tuple[str, int]] = field(default_factory=dict)
    """The advertised address per listener name; a client is told the one of the listener it used."""

    def bound(self, listener_addresses: dict[str, tuple[str, int]]) -> None:
        """The listeners bound: advertise their addresses (the first listener's is the default)."""
        self.listener_addresses = dict(listener_addresses)
        self.advertised = next(iter(self.listener_addresses.values()))

    def joined(self, cluster_id: str, directory: NodeDirectory) -> None:
        """This node joined a cluster: its id is the cluster's, and ``directory`` says who serves what."""
        self.cluster_id = cluster_id
        self.directory = directory

    def address_for(self, listener_name: str) -> tuple[str, int]:
        return self.listener_addresses.get(listener_name, self.advertised)


def new_cluster_id() -> str:
    """Kafka's form: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def read_identity(data_dir: Path, configured_node_id: int) -> tuple[NodeIdentity, bool]:
    """The directory's identity, or (True) a new one to be written by :func:`write_identity` once the
    node holds its data directory: reading it writes nothing."""
    path = data_dir / META_FILE
    if path.exists():
        props = _read_properties(path)
        return NodeIdentity(int(props["node.id"]), props["cluster.id"]), False
    return NodeIdentity(configured_node_id, new_cluster_id()), True


def write_identity(data_dir: Path, identity: NodeIdentity) -> None:
    """Keep ``identity`` in ``meta.properties`` (replaced durably: :mod:`kcoord.storage.atomic_file`)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    text = f"version=1\nnode.id={identity.node_id}\ncluster.id={identity.cluster_id}\n"
    write_text_atomically(data_dir / META_FILE, text)


def _read_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props
