"""kafka-python 3.0.12 loses a transactional request it takes from its queue while its coordinator
cannot be reached (:class:`~tests.transactions.pipeline_kafka_python.StalledCallError` names the code),
and the call waiting on it never returns, though kcoord is back. This pins that client bug, which the
kafka-python exactly-once pipeline works around, and the way through it the pipeline takes: a bounded
wait, then abort and a new producer, with nothing of the stalled transaction visible."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.protocol.metadata import CoordinatorType
from kafka.structs import OffsetAndMetadata

from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, read_all
from tests.transactions.pipeline_kafka_python import StalledCallError, bounded

pytestmark = pytest.mark.clients

SOURCE, SINK, GROUP, TRANSACTIONAL_ID = "lost-in", "lost-out", "lost-group", "lost-txn"
STALL_S = 5.0
"""How long the lost call is watched once kcoord answers again (a request that was sent is answered
in milliseconds)."""


def transactional(bootstrap: str) -> KafkaProducer:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=TRANSACTIONAL_ID, max_block_ms=int(DEADLINE_S * 1000)
    )
    producer.init_transactions()
    return producer


def wait_until_disconnected(producer: KafkaProducer) -> None:
    """Until the producer's network client has seen its coordinator's connection close (kafka-python's
    private client: no public sign says which connection is down)."""
    client = producer._sender._client
    deadline = time.monotonic() + DEADLINE_S
    while client.connected(producer._transaction_manager.coordinator(CoordinatorType.TRANSACTION)):
        assert time.monotonic() < deadline, "the producer never saw kcoord go"
        time.sleep(0.01)


@pytest.mark.slow
def test_kafka_python_loses_add_offsets_to_txn_sent_while_kcoord_is_down_and_the_pipeline_recovers(
    tmp_path: Path,
) -> None:
    """send_offsets_to_transaction called while kcoord is down never returns after kcoord is back (its
    AddOffsetsToTxn is neither queued nor in flight); the bounded wait gives up, the transaction is
    aborted, a new producer with the same transactional.id commits, and read_committed readers see only
    the committed record."""
    kcoord = KcoordProcess(tmp_path / "data")
    kcoord.start()
    try:
        create_topic(kcoord.bootstrap, SOURCE, partitions=1)
        create_topic(kcoord.bootstrap, SINK, partitions=1)
        producer = transactional(kcoord.bootstrap)
        producer.begin_transaction()
        producer.send(SINK, value=b"stalled", partition=0)
        producer.flush(DEADLINE_S)
        kcoord.kill()
        wait_until_disconnected(producer)
        offsets = {TopicPartition(SOURCE, 0): OffsetAndMetadata(1, "", -1)}
        # KafkaProducer.send_offsets_to_transaction's own steps, so that kcoord comes back only once the
        # sender has taken the request and given up on the coordinator (it forgets it, to look it up).
        manager = producer._transaction_manager
        stalled = manager.send_offsets_to_transaction(offsets, GROUP)
        producer._sender.wakeup()
        deadline = time.monotonic() + DEADLINE_S
        while manager.coordinator(CoordinatorType.TRANSACTION) is not None:
            assert time.monotonic() < deadline, "the sender never took the AddOffsetsToTxn request"
            time.sleep(0.01)
        kcoord.start()
        while manager.coordinator(CoordinatorType.TRANSACTION) is None:  # found again: kcoord answers
            assert time.monotonic() < deadline + DEADLINE_S, "the producer never found kcoord again"
            time.sleep(0.01)
        with pytest.raises(StalledCallError, match=r"queued \[\], in flight: False"):
            bounded(lambda: stalled.wait(), "send_offsets", producer, timeout_s=STALL_S)
        assert not stalled.is_done

        bounded(producer.abort_transaction, "abort_transaction", producer)
        producer.close(timeout=5)
        successor = transactional(kcoord.bootstrap)
        successor.begin_transaction()
        successor.send(SINK, value=b"committed", partition=0)
        bounded(lambda: successor.send_offsets_to_transaction(offsets, GROUP), "send_offsets", successor)
        bounded(successor.commit_transaction, "commit_transaction", successor)
        successor.close(timeout=5)

        assert read_all(kcoord.bootstrap, SINK, 1) == [b"committed"]
        assert sorted(read_all(kcoord.bootstrap, SINK, 1, committed_only=False)) == [b"committed", b"stalled"]
    finally:
        kcoord.kill()
