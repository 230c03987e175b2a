"""Helpers for transaction tests with real clients: transactional producers, read_committed readers,
and the operator APIs (FindCoordinator, DescribeTransactions, ListTransactions) by raw request."""

from __future__ import annotations

import time
import urllib.request
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from kcoord.protocol.api_keys import ApiKey
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess

DEADLINE_S = 30.0


def transactional_producer(bootstrap: str, transactional_id: str, **config: Any) -> Producer:
    """A confluent-kafka producer with ``transactional.id``, its transactions initialised."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **config}
    )
    producer.init_transactions(DEADLINE_S)
    return producer


def read_all(
    bootstrap: str, topic: str, partitions: int, *, committed_only: bool = True, settle_s: float = 1.5
) -> list[bytes]:
    """Every value a read_committed (or read_uncommitted) consumer sees from the start of ``topic``,
    read until the end offsets are reached and nothing new arrives for ``settle_s``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline and time.monotonic() - quiet_since < settle_s:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            values.append(bytes(message.value()))
            quiet_since = time.monotonic()
    finally:
        consumer.close()
    return values


def raw(kcoord: KcoordProcess) -> RawClient:
    return RawClient(kcoord.host, kcoord.port)


def describe(kcoord: KcoordProcess, transactional_id: str) -> Any:
    """DescribeTransactions v0 of one id (by raw request): its one transaction state."""
    with raw(kcoord) as client:
        response = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]})
    (state,) = response.transaction_states
    return state


def list_transactions(kcoord: KcoordProcess, states: list[str] | None = None) -> list[tuple[str, str]]:
    """ListTransactions v1 (by raw request): (transactional id, state) of every id this node holds."""
    with raw(kcoord) as client:
        response = client.call(
            ApiKey.LIST_TRANSACTIONS,
            1,
            {"state_filters": states or [], "producer_id_filters": [], "duration_filter": -1},
        )
    assert response.error_code == 0
    return [(t.transactional_id, t.transaction_state) for t in response.transaction_states]


def wait_for_state(kcoord: KcoordProcess, transactional_id: str, *states: str, within_s: float = 20.0) -> Any:
    deadline = time.monotonic() + within_s
    while True:
        state = describe(kcoord, transactional_id)
        if state.error_code == 0 and state.transaction_state in states:
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"{transactional_id} is {state.transaction_state!r}, not one of {states}")
        time.sleep(0.05)


def metric(kcoord: KcoordProcess, name: str) -> float:
    """One sample's value from the node's /metrics (``name`` with its labels, as exposed)."""
    with urllib.request.urlopen(f"http://{kcoord.metrics_address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {name} in /metrics")
