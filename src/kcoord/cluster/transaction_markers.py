"""The data partitions' side of a transaction's end, and the check a transactional Produce asks for.

- :class:`DataMarkerWriter` (contract A of issue 17): the transaction coordinator ends a
  transaction by writing a commit or abort marker (:func:`kcoord.protocol.control_batch.encode_marker_batch`)
  to every partition the transaction wrote to. The writer appends it to the partition's log and
  answers once the append returned (readable, and fsynced under ``flush.policy=always``: what
  Produce with acks=all waits for), then ends the producer's open transaction there, so the last
  stable offset moves and an abort enters the aborted index. The same writer serves
  WriteTxnMarkers (API 27) requests from other nodes (:mod:`kcoord.apis.broker.write_txn_markers`).

  Answers, as Kafka's ``ReplicaManager.appendRecords`` for markers: NONE, also for a producer with
  no open transaction on the partition (the marker is still written); INVALID_PRODUCER_EPOCH for a
  marker older than the producer's epoch on the partition; TRANSACTION_COORDINATOR_FENCED for a
  marker from an older coordinator epoch than the producer's last marker there;
  NOT_LEADER_OR_FOLLOWER for a partition another node of the cluster holds (or whose producer
  state is not loaded yet); UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist;
  KAFKA_STORAGE_ERROR when the append failed on the disk or database.

- :class:`TransactionVerifier` (contract C, KIP-890 part 1): a transactional Produce batch is
  appended only when the transaction coordinator confirms that its partition was added to the
  producer's ongoing transaction. The coordinator implements the protocol; Produce calls it.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.cluster.topic_manager import TopicManager
from kcoord.coordinator.transactions import TxnMarker
from kcoord.protocol.control_batch import encode_marker_batch
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.timer.api import Clock

__all__ = ["DataMarkerWriter", "TransactionVerifier"]

log = structlog.get_logger(__name__)


class TransactionVerifier(Protocol):
    """Whether a transactional batch may be appended (KIP-890 part 1's verification)."""

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        """NONE when ``topic``-``partition`` is part of the producer's ongoing transaction at that
        epoch; else the error the partition is answered with (INVALID_TXN_STATE for a partition not
        added, PRODUCER_FENCED / INVALID_PRODUCER_EPOCH for a stale epoch, NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS while the coordinator cannot tell)."""
        ...


class DataMarkerWriter:
    """Writes transaction markers to this node's data partitions (see the module docstring)."""

    def __init__(self, topics: TopicManager, producers: ProducerStateManager, clock: Clock) -> None:
        self._topics = topics
        self._producers = producers
        self._clock = clock

    async def write_marker(self, marker: TxnMarker, coordinator_epoch: int) -> ErrorCode:
        """Append the marker durably and end the producer's transaction on the partition."""
        topic, partition = marker.partition.topic, marker.partition.partition
        producer_id, producer_epoch, committed = marker.producer_id, marker.producer_epoch, marker.committed
        partition_log = self._topics.partition_log(topic, partition)
        if partition_log is None:
            return self._topics.missing_log_error(topic, partition)
        try:
            self._producers.check_marker(topic, partition, producer_id, producer_epoch, coordinator_epoch)
            batch = encode_marker_batch(
                producer_id, producer_epoch, committed, coordinator_epoch, self._clock.now_ms()
            )
            result = await partition_log.append(batch.data)
        except KafkaError as exc:
            log.info(
                "transaction_marker.refused",
                topic=topic,
                partition=partition,
                producer_id=producer_id,
                error=exc.code.name,
                reason=exc.message,
            )
            return exc.code
        except OSError as exc:
            log.warning("transaction_marker.storage_error", topic=topic, partition=partition, error=repr(exc))
            return ErrorCode.kafka_storage_error
        self._producers.end_transaction(
            topic, partition, producer_id, producer_epoch, coordinator_epoch, result.base_offset, committed
        )
        log.debug(
            "transaction_marker.written",
            topic=topic,
            partition=partition,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            committed=committed,
            offset=result.base_offset,
        )
        return ErrorCode.none
