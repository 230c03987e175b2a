"""InitProducerId handler: ids for idempotent producers, epochs of transactional ids."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kcoord.apis.broker.init_producer_id import handle_init_producer_id, init_producer_id_error
from kcoord.cluster.producer_id_allocator import ReadyProducerIds
from kcoord.coordinator.transactions import TransactionConfig
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.timer.clock import SystemClock

from .data_path_helpers import context, make_app, on_the_wire, request


async def test_issues_ids_and_bumps_epoch(tmp_path: Path) -> None:
    """v0 gets a fresh id at epoch 0; v4 re-init with that id and epoch bumps the epoch."""
    app = await make_app(tmp_path / "data")
    first = await handle_init_producer_id(
        context(ApiKey.INIT_PRODUCER_ID, 0),
        request(ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None, "transaction_timeout": 60000}),
        producers=app.producers,
        authorizer=app.authorizer,
    )
    assert first["error_code"] == ErrorCode.none and first["producer_epoch"] == 0
    bumped = await handle_init_producer_id(
        context(ApiKey.INIT_PRODUCER_ID, 4),
        request(
            ApiKey.INIT_PRODUCER_ID,
            4,
            {
                "transactional_id": None,
                "transaction_timeout": 60000,
                "producer_id": first["producer_id"],
                "producer_epoch": 0,
            },
        ),
        producers=app.producers,
        authorizer=app.authorizer,
    )
    assert (bumped["producer_id"], bumped["producer_epoch"]) == (first["producer_id"], 1)
    decoded = on_the_wire(ApiKey.INIT_PRODUCER_ID, 4, bumped)
    assert (decoded.producer_id, decoded.producer_epoch) == (first["producer_id"], 1)
    assert on_the_wire(ApiKey.INIT_PRODUCER_ID, 0, first).producer_epoch == 0


async def test_transactional_id_goes_to_the_transaction_coordinator(tmp_path: Path) -> None:
    """A transactional id gets its epoch from the transaction coordinator (bumped by each init) and a
    timeout over transaction.max.timeout.ms is INVALID_TRANSACTION_TIMEOUT."""
    app = await make_app(tmp_path / "data")
    ids = ReadyProducerIds(app.producers.new_producer_id)
    transactions = TransactionCoordinator(
        app.topics, SystemClock(), ids, TransactionConfig(max_timeout_ms=60000), num_partitions=2
    )
    ids.start()
    await transactions.start()
    await asyncio.wait_for(transactions.loaded.wait(), 10)

    async def init(timeout_ms: int) -> dict[str, Any]:
        req = request(
            ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout": timeout_ms}
        )
        for _ in range(100):  # the first ids are reserved in the background (COORDINATOR_LOAD_IN_PROGRESS)
            answer = await handle_init_producer_id(
                context(ApiKey.INIT_PRODUCER_ID, 4),
                req,
                producers=app.producers,
                authorizer=app.authorizer,
                transactions=transactions,
            )
            if answer["error_code"] != ErrorCode.coordinator_load_in_progress:
                return answer
            await asyncio.sleep(0.02)
        raise AssertionError("no producer id became ready")

    try:
        first, second = await init(1000), await init(1000)
        assert first["error_code"] == second["error_code"] == ErrorCode.none
        assert (second["producer_id"], second["producer_epoch"]) == (first["producer_id"], 1)
        assert (await init(60001))["error_code"] == ErrorCode.invalid_transaction_timeout
        assert init_producer_id_error(None, ErrorCode.none)["producer_id"] == -1
    finally:
        await transactions.stop()
        await ids.stop()
