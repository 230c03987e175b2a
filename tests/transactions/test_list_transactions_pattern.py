"""ListTransactions v2 (KIP-1152's transactional id pattern) against a real kcoord over loopback.

kafka-python 3's ``KafkaAdminClient.list_transactions(transactional_id_pattern=...)`` sends v2 and
refuses the argument outright when the broker's maximum is below 2; the transactional ids are made
by confluent-kafka's transactional producers.
"""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, raw, transactional_producer

pytestmark = pytest.mark.clients

TOPIC = "txn-pattern"


def listed_ids(admin: KafkaAdminClient, pattern: str, states: list[str] | None = None) -> list[str]:
    """The transactional ids kafka-python's admin lists (every broker's) for ``pattern``."""
    by_broker = admin.list_transactions(transactional_id_pattern=pattern, state_filters=states)
    return sorted(listing.transactional_id for listings in by_broker.values() for listing in listings)


def test_kafka_python_lists_the_ids_a_pattern_matches(kcoord: KcoordProcess) -> None:
    """kafka-python 3's list_transactions with a pattern lists only the ids it matches in full (with
    its state filter too); a pattern that does not compile answers INVALID_REGULAR_EXPRESSION."""
    create_topic(kcoord.bootstrap, TOPIC, partitions=1)
    open_one, *_ = [
        transactional_producer(kcoord.bootstrap, tid) for tid in ("orders-1", "orders-2", "audit-orders")
    ]
    open_one.begin_transaction()
    open_one.produce(TOPIC, value=b"pending")
    assert open_one.flush(DEADLINE_S) == 0

    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap, client_id="kp3-txn-admin")
    try:
        assert listed_ids(admin, "orders-.*") == ["orders-1", "orders-2"]
        assert listed_ids(admin, "orders") == []
        assert listed_ids(admin, ".*orders.*", ["Ongoing"]) == ["orders-1"]
        assert listed_ids(admin, ".*") == ["audit-orders", "orders-1", "orders-2"]
    finally:
        admin.close()
    open_one.abort_transaction(DEADLINE_S)

    with raw(kcoord) as client:
        refused = client.call(
            ApiKey.LIST_TRANSACTIONS,
            2,
            {
                "state_filters": [],
                "producer_id_filters": [],
                "duration_filter": -1,
                "transactional_id_pattern": "orders-(",
            },
        )
    assert refused.error_code == ErrorCode.invalid_regular_expression
    assert list(refused.transaction_states) == []
