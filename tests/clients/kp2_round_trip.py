"""Run the round-trip scenario with kafka-python 2.0.2, which cannot share a virtualenv with 3.x.

Run by tests/clients/test_kafka_python2.py under ``$KCOORD_KP2_PYTHON``:

    kp2_round_trip.py --bootstrap HOST:PORT --topic NAME --codec none|gzip|snappy|lz4|zstd --base-ts MS

It creates the topic with KafkaAdminClient, produces the messages of tests/support/clients.py
(acks=all), reads them back with assign() + seek_to_beginning(), and prints one JSON object:
``{"kafka_python": version, "received": [[partition, offset, key, value, headers, timestamp], ...]}``
with bytes as latin-1 strings, or ``{"error": "..."}`` with exit status 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

DEADLINE_S = 20.0


def _scenario() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "support" / "clients.py"
    spec = importlib.util.spec_from_file_location("round_trip_scenario", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp2-admin")
    try:
        response = admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    errors = [entry[1] for entry in response.topic_errors]
    if errors != [0]:
        raise RuntimeError(f"CreateTopics answered {response.topic_errors}")


def produce(bootstrap: str, topic: str, messages: list[Any], codec: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
    )
    try:
        futures = [
            producer.send(
                topic, key=m.key, value=m.value, headers=list(m.headers), timestamp_ms=m.timestamp_ms
            )
            for m in messages
        ]
        producer.flush(timeout=DEADLINE_S)
        for future in futures:
            future.get(timeout=1)
    finally:
        producer.close(timeout=5)


def consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[list[Any]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    received: list[list[Any]] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + DEADLINE_S
        while len(received) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=5000).values():
                received.extend(
                    [
                        r.partition,
                        r.offset,
                        _text(r.key),
                        _text(r.value),
                        [[name, _text(value)] for name, value in r.headers],
                        r.timestamp,
                    ]
                    for r in records
                )
    finally:
        consumer.close()
    return received


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--codec", required=True)
    parser.add_argument("--base-ts", type=int, required=True)
    args = parser.parse_args()
    scenario = _scenario()
    try:
        import kafka

        messages = scenario.make_messages("kafka-python-2", base_ts=args.base_ts)
        create_topic(args.bootstrap, args.topic, scenario.PARTITIONS)
        produce(args.bootstrap, args.topic, messages, args.codec)
        received = consume(args.bootstrap, args.topic, scenario.PARTITIONS, len(messages))
    except Exception:
        print(json.dumps({"error": traceback.format_exc()}))
        return 1
    print(json.dumps({"kafka_python": kafka.__version__, "received": received}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
