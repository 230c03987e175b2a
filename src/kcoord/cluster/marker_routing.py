"""Transaction markers for partitions another node of the cluster leads: WriteTxnMarkers to that node.

The transaction coordinator of a transactional id is the owner of the id's ``__transaction_state``
partition; the transaction's partitions may be led by other nodes: its data partitions, and the
``__consumer_offsets`` partition of the group whose offsets it committed (TxnOffsetCommit). Kafka's
coordinator sends them WriteTxnMarkers (API 27); so does :class:`RoutingMarkerWriter`: a partition
this node holds is written by the :class:`LocalMarkerWriter`, one another live node owns gets a
WriteTxnMarkers v1 request on a connection kept per node (one request at a time per connection),
and the partition's answer is the marker's. The receiving node's WriteTxnMarkers handler writes
with its own :class:`LocalMarkerWriter`.

:class:`LocalMarkerWriter` sends a marker for a data partition to the
:class:`~kcoord.cluster.transaction_markers.DataMarkerWriter` and one for an offsets partition to
the group coordinator (``write_end_marker``: through the partition's runner, so its pending
transactional offsets become committed or are dropped), as Kafka's broker appends the marker and
then tells its group coordinator (``onTransactionCompleted``). The group coordinator's
NOT_COORDINATOR (it does not hold the partition) is answered NOT_LEADER_OR_FOLLOWER, what Kafka's
broker answers for a partition it does not lead. A connection that fails is
dropped and the marker answers NOT_LEADER_OR_FOLLOWER, which the dispatcher retries (after the
membership has perhaps moved the partition). Only plaintext listeners are reached this way: kcoord
has no inter-node credentials, so a cluster whose nodes accept only TLS or SASL cannot route
markers (the marker is retried and the transaction stays PrepareCommit/PrepareAbort).
"""

from __future__ import annotations

import asyncio
import io
import itertools
import struct
from collections.abc import Callable
from typing import Any, Protocol

import structlog
from kio.serial import entity_reader, entity_writer

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import build, request_class, response_class
from kcoord.protocol.errors import ErrorCode

__all__ = ["EndMarkerLog", "LocalMarkerWriter", "MarkerWriter", "RoutingMarkerWriter"]

log = structlog.get_logger(__name__)

WRITE_TXN_MARKERS_V = 1
_TIMEOUT_S = 10.0

OwnerOf = Callable[[str, int], "tuple[str, int] | None"]
"""``(topic, partition) -> (host, port)`` of the live node that leads it, None for this node or none."""


class MarkerWriter(Protocol):
    """Writes one transaction marker to one partition (contract A's signature)."""

    async def write_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
    ) -> ErrorCode: ...


class EndMarkerLog(Protocol):
    """Contract B: the group coordinator's ``write_end_marker`` for its offsets partitions."""

    async def write_end_marker(
        self, partition: int, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int
    ) -> ErrorCode: ...


class LocalMarkerWriter:
    """This node's partitions: data partitions to the data writer, offsets partitions to the group
    coordinator (see the module docstring)."""

    def __init__(self, data: MarkerWriter, offsets: EndMarkerLog, offsets_topic: str) -> None:
        self._data = data
        self._offsets = offsets
        self._offsets_topic = offsets_topic

    async def write_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
    ) -> ErrorCode:
        if topic != self._offsets_topic:
            return await self._data.write_marker(
                topic, partition, producer_id, producer_epoch, committed, coordinator_epoch
            )
        error = await self._offsets.write_end_marker(
            partition, producer_id, producer_epoch, committed, coordinator_epoch
        )
        return ErrorCode.not_leader_or_follower if error is ErrorCode.not_coordinator else error


class _NodeConnection:
    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._lock = asyncio.Lock()
        self._correlation = itertools.count(1)

    async def call(self, body: dict[str, Any]) -> Any:
        async with self._lock:
            if self._streams is None:
                self._streams = await asyncio.wait_for(asyncio.open_connection(*self.address), _TIMEOUT_S)
            reader, writer = self._streams
            correlation_id = next(self._correlation)
            writer.write(_encode(body, correlation_id))
            await writer.drain()
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), _TIMEOUT_S))[0]
            frame = await asyncio.wait_for(reader.readexactly(size), _TIMEOUT_S)
        cls = response_class(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_V)
        offset = 5 if cls.__header_schema__.__flexible__ else 4  # correlation id, empty tagged fields
        response, _ = entity_reader(cls)(frame, offset)
        return response

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


def _encode(body: dict[str, Any], correlation_id: int) -> bytes:
    cls = request_class(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_V)
    assert cls is not None
    header_cls = cls.__header_schema__
    header = header_cls(
        request_api_key=ApiKey.WRITE_TXN_MARKERS,
        request_api_version=WRITE_TXN_MARKERS_V,
        correlation_id=correlation_id,
        client_id="kcoord-transaction-coordinator",
    )
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header)
    entity_writer(cls)(buffer, build(cls, body))
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


class RoutingMarkerWriter:
    """Contract A for the whole cluster: local partitions locally, the others by WriteTxnMarkers."""

    def __init__(self, local: MarkerWriter, owner_of: OwnerOf) -> None:
        self._local = local
        self._owner_of = owner_of
        self._connections: dict[tuple[str, int], _NodeConnection] = {}

    async def write_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
    ) -> ErrorCode:
        owner = self._owner_of(topic, partition)
        if owner is None:
            return await self._local.write_marker(
                topic, partition, producer_id, producer_epoch, committed, coordinator_epoch
            )
        connection = self._connections.get(owner)
        if connection is None:
            connection = self._connections[owner] = _NodeConnection(*owner)
        body = {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": committed,
                    "topics": [{"name": topic, "partition_indexes": [partition]}],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        }
        try:
            response = await connection.call(body)
        except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError) as exc:
            log.warning("transaction_marker.remote_failed", node=f"{owner[0]}:{owner[1]}", error=repr(exc))
            connection.close()
            self._connections.pop(owner, None)
            return ErrorCode.not_leader_or_follower
        for marker in response.markers:
            for topic_result in marker.topics:
                for result in topic_result.partitions:
                    return ErrorCode(int(result.error_code))
        return ErrorCode.unknown_server_error

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
