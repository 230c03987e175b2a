"""A share consumer process that takes one delivery and holds it: explicit mode, it polls until it
gets records, prints their values as one JSON line, then never acknowledges (its heartbeats go on in
librdkafka's threads until the test stops the process).

Run: ``python -m tests.support.share_holder BOOTSTRAP GROUP TOPIC``.
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import ShareConsumer


def main(bootstrap: str, group: str, topic: str) -> None:
    consumer = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    consumer.subscribe([topic])
    print(json.dumps({"subscribed": True}), flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        messages = [m for m in consumer.poll(0.2) if m.error() is None]
        if messages:
            print(json.dumps({"held": [int(m.value()) for m in messages]}), flush=True)
            break
    time.sleep(120)


if __name__ == "__main__":
    main(*sys.argv[1:4])
