"""A kafka-python group member run as a subprocess, so a test can freeze it (SIGSTOP) mid-group.

Usage: ``python stuck_consumer.py BOOTSTRAP GROUP TOPIC CLIENT_ID MAX_POLL_INTERVAL_MS``. It polls
forever and prints ``assigned`` once it owns partitions; a frozen process neither polls nor
heartbeats nor leaves, which is what a consumer stuck past max.poll.interval.ms looks like to
the coordinator when its heartbeat thread is stuck too.
"""

from __future__ import annotations

import sys
import time

from kafka import KafkaConsumer

SESSION_TIMEOUT_MS = 10_000


def main() -> None:
    bootstrap, group, topic, client_id, max_poll_interval_ms = sys.argv[1:6]
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        enable_auto_commit=False,
        max_poll_interval_ms=int(max_poll_interval_ms),
        session_timeout_ms=SESSION_TIMEOUT_MS,
    )
    # Learn the topic first (see tests/support/kafka_python.py for the kafka-python stall it avoids).
    while not consumer.partitions_for_topic(topic):
        time.sleep(0.05)
    consumer.subscribe([topic])
    announced = False
    while True:
        consumer.poll(timeout_ms=100)
        if consumer.assignment() and not announced:
            print("assigned", flush=True)
            announced = True


if __name__ == "__main__":
    main()
