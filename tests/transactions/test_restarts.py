"""Transactions across a kcoord crash: the coordinator's state is replayed from ``__transaction_state``.

A transaction left open when kcoord is SIGKILLed is still Ongoing after the restart, and the
coordinator aborts it once it outlives its timeout: its records never reach read_committed
readers, and the last stable offset moves on, so a later committed transaction on the same
partition is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, describe, read_all, transactional_producer, wait_for_state
from tests.transactions.pipeline import NO_REBOOTSTRAP

pytestmark = pytest.mark.clients

TOPIC = "txn-crash"
SCAN_SETTINGS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


def test_an_open_transaction_is_aborted_on_its_timeout_after_a_crash(
    kcoord_factory: type[KcoordProcess], tmp_path: Path
) -> None:
    """SIGKILL with a transaction open: after the restart it is still Ongoing (replayed), then aborted at a
    fencing epoch when its 3 s timeout passes; read_committed readers skip it and see what came after."""
    kcoord = kcoord_factory(tmp_path / "data", SCAN_SETTINGS).start()
    create_topic(kcoord.bootstrap, TOPIC, partitions=1)
    before = transactional_producer(kcoord.bootstrap, "txn-before")
    before.begin_transaction()
    before.produce(TOPIC, value=b"committed-before")
    before.commit_transaction(DEADLINE_S)

    lost = transactional_producer(
        kcoord.bootstrap, "txn-lost", **{"transaction.timeout.ms": 3000, **NO_REBOOTSTRAP}
    )
    lost.begin_transaction()
    for i in range(5):
        lost.produce(TOPIC, value=b"open-%d" % i)
    assert lost.flush(DEADLINE_S) == 0
    open_state = describe(kcoord, "txn-lost")
    assert open_state.transaction_state == "Ongoing"
    del lost  # the application is gone too: nobody will end this transaction

    kcoord.restart()
    replayed = describe(kcoord, "txn-lost")
    assert (replayed.transaction_state, replayed.producer_epoch) in {
        ("Ongoing", open_state.producer_epoch),
        ("PrepareAbort", open_state.producer_epoch + 1),
        ("CompleteAbort", open_state.producer_epoch + 1),
    }
    aborted = wait_for_state(kcoord, "txn-lost", "CompleteAbort", within_s=DEADLINE_S)
    assert aborted.producer_epoch == open_state.producer_epoch + 1

    after = transactional_producer(kcoord.bootstrap, "txn-after")
    after.begin_transaction()
    after.produce(TOPIC, value=b"committed-after")
    after.commit_transaction(DEADLINE_S)
    assert read_all(kcoord.bootstrap, TOPIC, 1) == [b"committed-before", b"committed-after"]
    assert sorted(read_all(kcoord.bootstrap, TOPIC, 1, committed_only=False)) == sorted(
        [b"committed-before", b"committed-after"] + [b"open-%d" % i for i in range(5)]
    )
