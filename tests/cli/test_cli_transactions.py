"""``kcoord transactions list|describe`` against a real kcoord holding a real producer's open transaction."""

from __future__ import annotations

import json

import pytest

from kcoord.cli import main
from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, transactional_producer

pytestmark = pytest.mark.clients


def test_list_and_describe_show_an_open_transaction(
    kcoord: KcoordProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """``list`` shows the id Ongoing with its producer id (``--state`` filters), ``describe`` its epoch,
    timeout and partitions; an unknown id, or one with no transaction yet, exits 1 with the reason."""
    create_topic(kcoord.bootstrap, "cli-txn", partitions=2)
    producer = transactional_producer(kcoord.bootstrap, "cli-tx", **{"transaction.timeout.ms": 45_000})
    producer.begin_transaction()
    producer.produce("cli-txn", value=b"v", partition=1)
    assert producer.flush(DEADLINE_S) == 0
    capsys.readouterr()

    assert main(["transactions", "list", "--bootstrap", kcoord.bootstrap, "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert (listed["transactional_id"], listed["state"]) == ("cli-tx", "Ongoing")
    assert main(["transactions", "list", "--bootstrap", kcoord.bootstrap, "--state", "CompleteAbort"]) == 0
    assert "cli-tx" not in capsys.readouterr().out

    assert main(["transactions", "describe", "cli-tx", "--bootstrap", kcoord.bootstrap, "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["producer_id"] == listed["producer_id"]
    assert (described["state"], described["timeout_ms"], described["partitions"]) == (
        "Ongoing",
        45_000,
        ["cli-txn-1"],
    )
    assert main(["transactions", "describe", "cli-tx", "--bootstrap", kcoord.bootstrap]) == 0
    assert "cli-txn-1" in capsys.readouterr().out
    producer.abort_transaction(DEADLINE_S)

    assert main(["transactions", "describe", "nobody", "--bootstrap", kcoord.bootstrap]) == 1
    assert "TRANSACTIONAL_ID_NOT_FOUND" in capsys.readouterr().err
    transactional_producer(kcoord.bootstrap, "cli-fresh")  # Empty: its start time is Kafka's -1
    assert main(["transactions", "describe", "cli-fresh", "--bootstrap", kcoord.bootstrap]) == 1
    assert "no transaction has started yet" in capsys.readouterr().err
