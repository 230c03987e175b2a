"""Fetch long-poll over a real socket: an empty partition waits max_wait, an append ends the wait at once."""

from __future__ import annotations

import threading
import time

from tests.support.batches import build_batch, read_batches
from tests.support.raw_client import RawClient
from tests.support.raw_ops import FETCH, FETCH_VERSION, create_topic, fetch_body, parse_fetch, produce
from tests.support.server import KcoordProcess


def test_empty_partition_answers_after_max_wait(shared_kcoord: KcoordProcess, topic_name: str) -> None:
    """A Fetch with max_wait 500 ms on an empty partition answers, empty, after about 500 ms."""
    with RawClient(shared_kcoord.host, shared_kcoord.port) as client:
        assert create_topic(client, topic_name) == 0
        started = time.monotonic()
        response = client.call(FETCH, FETCH_VERSION, fetch_body(topic_name, 0, 0, max_wait_ms=500))
        elapsed = time.monotonic() - started
    fetched = parse_fetch(response)
    assert fetched.error_code == 0
    assert fetched.records == b""
    assert 0.4 <= elapsed <= 1.5, elapsed


def test_produce_during_wait_answers_at_once(shared_kcoord: KcoordProcess, topic_name: str) -> None:
    """A produce while a Fetch waits (max_wait 5 s) makes the Fetch answer within 250 ms with the record."""
    with (
        RawClient(shared_kcoord.host, shared_kcoord.port) as waiter,
        RawClient(shared_kcoord.host, shared_kcoord.port) as producer,
    ):
        assert create_topic(producer, topic_name) == 0
        produced_at: list[float] = []

        def produce_soon() -> None:
            time.sleep(0.3)
            produced_at.append(time.monotonic())
            produce(
                producer,
                topic_name,
                0,
                build_batch([(b"k", b"wake up")], timestamp_ms=int(time.time() * 1000)),
            )

        thread = threading.Thread(target=produce_soon)
        started = time.monotonic()
        correlation_id = waiter.send(FETCH, FETCH_VERSION, fetch_body(topic_name, 0, 0, max_wait_ms=5000))
        thread.start()
        response = waiter.recv(FETCH, FETCH_VERSION, correlation_id)
        answered = time.monotonic()
        thread.join()
    assert produced_at, "the producer thread did not run"
    assert answered - started >= 0.25, "answered before anything was produced"
    assert answered - produced_at[0] < 0.25, answered - produced_at[0]
    fetched = parse_fetch(response)
    assert fetched.error_code == 0
    assert [r.value for b in read_batches(fetched.records) for r in b.records] == [b"wake up"]
