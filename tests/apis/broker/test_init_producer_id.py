"""InitProducerId handler: ids for idempotent producers, refusal of transactional ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcoord.apis.broker.init_producer_id import handle_init_producer_id, init_producer_id_error
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError

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


async def test_transactional_id_is_refused(tmp_path: Path) -> None:
    """A transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED: kcoord has no transactions."""
    app = await make_app(tmp_path / "data")
    req = request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout": 60000})
    with pytest.raises(KafkaError) as raised:
        await handle_init_producer_id(
            context(ApiKey.INIT_PRODUCER_ID, 4), req, producers=app.producers, authorizer=app.authorizer
        )
    assert raised.value.code == ErrorCode.transactional_id_authorization_failed
    shaped = init_producer_id_error(req, raised.value.code)
    assert (shaped["producer_id"], shaped["producer_epoch"]) == (-1, -1)
