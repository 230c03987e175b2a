"""The transaction APIs ask Kafka's ACLs: TransactionalId WRITE for the producer's requests, DESCRIBE for
FindCoordinator and DescribeTransactions, and Topic WRITE for the partitions added to a transaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcoord.apis.broker.init_producer_id import handle_init_producer_id
from kcoord.apis.groups.find_coordinator import handle_find_coordinator
from kcoord.apis.transactions.add_partitions_to_txn import handle_add_partitions_to_txn
from kcoord.apis.transactions.describe_transactions import handle_describe_transactions
from kcoord.apis.transactions.end_txn import handle_end_txn
from kcoord.cluster.identity import Node
from kcoord.cluster.producer_id_allocator import ReadyProducerIds
from kcoord.coordinator.transactions import TransactionConfig
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.security.acl import AclBinding, AclOperation, AclPermission, PatternType, ResourceType
from kcoord.security.acl_store import AclStore, acl_file
from kcoord.security.authorizer import AclAuthorizer
from kcoord.timer.clock import SystemClock

from .data_path_helpers import context, make_app, request

ANONYMOUS = "User:ANONYMOUS"


def grant(kind: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(kind, name, PatternType.LITERAL, ANONYMOUS, "*", op, AclPermission.ALLOW)


async def test_transactional_requests_need_the_ids_acls(tmp_path: Path) -> None:
    """Without TransactionalId WRITE, InitProducerId and EndTxn answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    and AddPartitionsToTxn repeats it per partition; WRITE on the id but not on the topic answers
    TOPIC_AUTHORIZATION_FAILED; FindCoordinator and DescribeTransactions need DESCRIBE."""
    app = await make_app(tmp_path / "data")
    auth = AclAuthorizer(AclStore(acl_file(tmp_path)), super_users=[], allow_if_no_acl=False)
    await auth.load()
    await auth.create(
        [
            grant(ResourceType.TRANSACTIONAL_ID, "writer", AclOperation.WRITE),
            grant(ResourceType.TRANSACTIONAL_ID, "viewed", AclOperation.DESCRIBE),
        ]
    )
    transactions = TransactionCoordinator(
        app.topics,
        SystemClock(),
        ReadyProducerIds(app.producers.new_producer_id),
        TransactionConfig(),
        num_partitions=1,
    )

    init = request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "viewed", "transaction_timeout": 1000})
    with pytest.raises(KafkaError) as refused:
        await handle_init_producer_id(
            context(ApiKey.INIT_PRODUCER_ID, 4),
            init,
            producers=app.producers,
            authorizer=auth,
            transactions=transactions,
        )
    assert refused.value.code == ErrorCode.transactional_id_authorization_failed

    end = request(
        ApiKey.END_TXN,
        3,
        {"transactional_id": "viewed", "producer_id": 1, "producer_epoch": 0, "committed": True},
    )
    with pytest.raises(KafkaError) as refused:
        await handle_end_txn(context(ApiKey.END_TXN, 3), end, transactions=transactions, authorizer=auth)
    assert refused.value.code == ErrorCode.transactional_id_authorization_failed

    def add_partitions(transactional_id: str) -> object:
        body = {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}],
        }
        return request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, body)

    for transactional_id, expected in (
        ("viewed", ErrorCode.transactional_id_authorization_failed),
        ("writer", ErrorCode.topic_authorization_failed),
    ):
        answer = await handle_add_partitions_to_txn(
            context(ApiKey.ADD_PARTITIONS_TO_TXN, 3),
            add_partitions(transactional_id),
            transactions=transactions,
            topic_of=app.topics.get,
            authorizer=auth,
        )
        (topic,) = answer["results_by_topic_v3_and_below"]
        assert [r["partition_error_code"] for r in topic["results_by_partition"]] == [expected, expected]

    node = Node(1, "cluster", ("127.0.0.1", 9092))
    found = await handle_find_coordinator(
        context(ApiKey.FIND_COORDINATOR, 4),
        request(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["viewed", "writer", "stranger"]}
        ),
        node=node,
        authorizer=auth,
    )
    assert [(c["key"], c["error_code"]) for c in found["coordinators"]] == [
        ("viewed", ErrorCode.none),
        ("writer", ErrorCode.none),  # WRITE implies DESCRIBE, as in Kafka
        ("stranger", ErrorCode.transactional_id_authorization_failed),
    ]

    described = await handle_describe_transactions(
        context(ApiKey.DESCRIBE_TRANSACTIONS, 0),
        request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["stranger"]}),
        transactions=transactions,
        authorizer=auth,
    )
    assert [s["error_code"] for s in described["transaction_states"]] == [
        ErrorCode.transactional_id_authorization_failed
    ]
