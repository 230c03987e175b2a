"""Transactions with confluent-kafka (librdkafka) against a real kcoord over loopback.

The transaction coordinator, the data partitions' markers and read_committed all run in one
``kcoord serve`` subprocess; the producer is librdkafka's transactional producer, the readers its
read_committed and read_uncommitted consumers. Operator views are asked for by raw request
(confluent-kafka's admin client has no transaction API).
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException

from kcoord.protocol.api_keys import ApiKey
from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import (
    DEADLINE_S,
    describe,
    list_transactions,
    metric,
    raw,
    read_all,
    transactional_producer,
    wait_for_state,
)

pytestmark = pytest.mark.clients

TOPIC = "txn-out"


def test_committed_transactions_are_read_and_aborted_ones_are_not(kcoord: KcoordProcess) -> None:
    """Two committed and one aborted transaction (plus an empty one of each): read_committed readers see
    exactly the committed records, read_uncommitted ones all of them, and the metrics count the ends."""
    create_topic(kcoord.bootstrap, TOPIC, partitions=2)
    producer = transactional_producer(kcoord.bootstrap, "txn-writer")
    for prefix, commit in ((b"c1-", True), (b"a-", False), (b"c2-", True)):
        producer.begin_transaction()
        for i in range(20):
            producer.produce(TOPIC, value=prefix + b"%d" % i, partition=i % 2)
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            assert producer.flush(DEADLINE_S) == 0  # abort_transaction purges what is still unsent
            producer.abort_transaction(DEADLINE_S)
    producer.begin_transaction()
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    producer.abort_transaction(DEADLINE_S)

    committed = sorted(read_all(kcoord.bootstrap, TOPIC, 2))
    assert committed == sorted([b"c1-%d" % i for i in range(20)] + [b"c2-%d" % i for i in range(20)])
    everything = read_all(kcoord.bootstrap, TOPIC, 2, committed_only=False)
    assert sorted(everything) == sorted(committed + [b"a-%d" % i for i in range(20)])
    assert metric(kcoord, 'kcoord_transactions_completed_total{result="commit"}') == 2
    assert metric(kcoord, 'kcoord_transactions_completed_total{result="abort"}') == 1
    assert metric(kcoord, "kcoord_transactions_open") == 0
    assert wait_for_state(kcoord, "txn-writer", "CompleteCommit", "CompleteAbort", "Empty").error_code == 0


def test_a_second_instance_fences_the_first(kcoord: KcoordProcess) -> None:
    """A second producer with the same transactional.id aborts the first's open transaction and fences it:
    the first's commit fails as fenced, and nothing it wrote becomes visible to read_committed readers."""
    create_topic(kcoord.bootstrap, TOPIC, partitions=1)
    zombie = transactional_producer(kcoord.bootstrap, "txn-fenced")
    zombie.begin_transaction()
    for i in range(10):
        zombie.produce(TOPIC, value=b"zombie-%d" % i)
    zombie.flush(DEADLINE_S)

    successor = transactional_producer(kcoord.bootstrap, "txn-fenced")
    successor.begin_transaction()
    for i in range(10):
        successor.produce(TOPIC, value=b"successor-%d" % i)
    successor.commit_transaction(DEADLINE_S)

    with pytest.raises(KafkaException) as failed:
        zombie.produce(TOPIC, value=b"zombie-late")
        zombie.commit_transaction(DEADLINE_S)
    assert failed.value.args[0].fatal() or "fenced" in str(failed.value).lower()
    assert sorted(read_all(kcoord.bootstrap, TOPIC, 1)) == sorted(b"successor-%d" % i for i in range(10))
    state = describe(kcoord, "txn-fenced")
    assert state.producer_epoch >= 1


def test_find_coordinator_and_the_operator_views(kcoord: KcoordProcess) -> None:
    """FindCoordinator key type 1 (v3 and v4's batch) names this node; ListTransactions and
    DescribeTransactions show an open transaction with its partitions, then its end."""
    create_topic(kcoord.bootstrap, TOPIC, partitions=2)
    with raw(kcoord) as client:
        single = client.call(ApiKey.FIND_COORDINATOR, 3, {"key": "txn-viewed", "key_type": 1})
        batch = client.call(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["txn-viewed", "another"]}
        )
    assert (single.error_code, single.port) == (0, kcoord.port)
    assert [(c.key, c.error_code, c.port) for c in batch.coordinators] == [
        ("txn-viewed", 0, kcoord.port),
        ("another", 0, kcoord.port),
    ]

    producer = transactional_producer(kcoord.bootstrap, "txn-viewed", **{"transaction.timeout.ms": 60_000})
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"open", partition=1)
    producer.flush(DEADLINE_S)
    assert ("txn-viewed", "Ongoing") in list_transactions(kcoord)
    assert list_transactions(kcoord, ["PrepareCommit"]) == []
    state = describe(kcoord, "txn-viewed")
    assert (state.error_code, state.transaction_state) == (0, "Ongoing")
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [(TOPIC, [1])]
    assert state.transaction_timeout.total_seconds() == 60
    assert metric(kcoord, "kcoord_transactions_open") == 1
    producer.commit_transaction(DEADLINE_S)
    wait_for_state(kcoord, "txn-viewed", "CompleteCommit")
    assert describe(kcoord, "no-such-id").error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND
