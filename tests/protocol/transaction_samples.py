"""Round-trip cases of the transaction coordinator's APIs (merged into ``request_samples.CASES``).

Each case's transactional id is the scene's topic name, unique per API and version, so the
cases never meet each other's transactions on the module's one server.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.request_samples import Case, Scene, create_topic


async def init_transactional(scene: Scene) -> None:
    """InitProducerId v4 for the scene's transactional id (retried while ids are being reserved)."""
    body = {
        "transactional_id": scene.topic,
        "transaction_timeout": 60_000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    for _ in range(200):
        response = await scene.client.call(ApiKey.INIT_PRODUCER_ID, 4, body)
        if response.error_code != ErrorCode.coordinator_load_in_progress:
            break
        await asyncio.sleep(0.02)
    assert response.error_code == ErrorCode.none
    scene.producer_id, scene.producer_epoch = int(response.producer_id), int(response.producer_epoch)


async def in_a_transaction(scene: Scene) -> None:
    """The scene's topic exists and the scene's transactional id has partition 0 of it in its transaction."""
    await create_topic(scene)
    await init_transactional(scene)
    response = await scene.client.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions_sample(scene))
    assert response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0


async def topic_and_producer(scene: Scene) -> None:
    await create_topic(scene)
    await init_transactional(scene)


def add_partitions_sample(scene: Scene) -> dict[str, Any]:
    return {
        "v3_and_below_transactional_id": scene.topic,
        "v3_and_below_producer_id": scene.producer_id,
        "v3_and_below_producer_epoch": scene.producer_epoch,
        "v3_and_below_topics": [{"name": scene.topic, "partitions": [0]}],
    }


def add_offsets_sample(scene: Scene) -> dict[str, Any]:
    return {
        "transactional_id": scene.topic,
        "producer_id": scene.producer_id,
        "producer_epoch": scene.producer_epoch,
        "group_id": scene.group,
    }


def end_txn_sample(scene: Scene) -> dict[str, Any]:
    return {
        "transactional_id": scene.topic,
        "producer_id": scene.producer_id,
        "producer_epoch": scene.producer_epoch,
        "committed": False,
    }


def describe_transactions_sample(scene: Scene) -> dict[str, Any]:
    return {"transactional_ids": [scene.topic]}


def list_transactions_sample(scene: Scene) -> dict[str, Any]:
    return {"state_filters": ["Ongoing"], "producer_id_filters": [scene.producer_id], "duration_filter": -1}


async def check_add_partitions(scene: Scene, response: Any) -> None:
    (topic,) = response.results_by_topic_v3_and_below
    assert topic.name == scene.topic
    assert [(p.partition_index, p.partition_error_code) for p in topic.results_by_partition] == [
        (0, ErrorCode.none)
    ]
    await _assert_described(scene, "Ongoing", [(scene.topic, (0,))])


async def check_add_offsets(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    (described,) = await _described(scene)
    assert [t.topic for t in described.topics] == ["__consumer_offsets"]


async def check_end_txn(scene: Scene, response: Any) -> None:
    """The abort is decided (PrepareAbort, or CompleteAbort once its marker is written)."""
    assert response.error_code == ErrorCode.none
    (described,) = await _described(scene)
    assert described.transaction_state in ("PrepareAbort", "CompleteAbort")


async def check_describe_transactions(scene: Scene, response: Any) -> None:
    (state,) = response.transaction_states
    assert (state.error_code, state.transactional_id, state.transaction_state) == (
        ErrorCode.none,
        scene.topic,
        "Ongoing",
    )
    assert (state.producer_id, state.producer_epoch) == (scene.producer_id, scene.producer_epoch)


async def check_list_transactions(scene: Scene, response: Any) -> None:
    assert response.error_code == ErrorCode.none
    assert [
        (t.transactional_id, t.producer_id, t.transaction_state) for t in response.transaction_states
    ] == [(scene.topic, scene.producer_id, "Ongoing")]


async def _described(scene: Scene) -> Any:
    response = await scene.client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, describe_transactions_sample(scene))
    return response.transaction_states


async def _assert_described(scene: Scene, state: str, topics: list[tuple[str, tuple[int, ...]]]) -> None:
    (described,) = await _described(scene)
    assert described.transaction_state == state
    assert [(t.topic, tuple(t.partitions)) for t in described.topics] == topics


TRANSACTION_CASES: dict[int, Case] = {
    ApiKey.ADD_PARTITIONS_TO_TXN: Case(add_partitions_sample, check_add_partitions, topic_and_producer),
    ApiKey.ADD_OFFSETS_TO_TXN: Case(add_offsets_sample, check_add_offsets, init_transactional),
    ApiKey.END_TXN: Case(end_txn_sample, check_end_txn, in_a_transaction),
    ApiKey.DESCRIBE_TRANSACTIONS: Case(
        describe_transactions_sample, check_describe_transactions, in_a_transaction
    ),
    ApiKey.LIST_TRANSACTIONS: Case(list_transactions_sample, check_list_transactions, in_a_transaction),
}
