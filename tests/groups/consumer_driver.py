"""One consumer-group member driven from a test: a real Python client that reports what it does as JSON lines.

Run as a script (also under kafka-python 2.0.2's own interpreter, so it imports nothing from the
test tree). It subscribes to one topic in one group, commits synchronously after every batch and
again when partitions are revoked, and writes one JSON object per line to stdout:

- ``{"event": "started"}`` once the client object exists;
- ``{"event": "assigned", "partitions": [...], "generation": g}`` with the FULL current assignment,
  after every change (``generation`` is null when the client does not expose it);
- ``{"event": "revoked", "partitions": [...]}`` when partitions are taken away;
- ``{"event": "consumed", "records": [[partition, offset], ...]}`` for every polled batch;
- ``{"event": "committed", "offsets": {"partition": next_offset}}`` after each successful commit;
- ``{"event": "commit_retry"}`` (confluent-kafka) before committing again, with nothing new consumed,
  because the group refused the previous commit for a rebalance (see ``run_confluent``);
- ``{"event": "error", "message": ...}`` for client errors it survives, then ``{"event": "closed"}``;
- ``{"event": "client_error", "where": ..., "name": ..., "code": ..., "retriable": ...}`` for EVERY error
  the client reports: confluent-kafka's ``error_cb``, message and commit errors (``retriable`` is
  ``KafkaError.retriable()``); kafka-python's and aiokafka's exceptions (their ``.retriable``) and
  every non-zero error code in a broker answer, even one the library retries by itself (seen where
  the library turns the code into its exception class). Tests classify these against Kafka's list.

It reads commands from stdin: ``close`` closes the client gracefully (leaving the group) and exits.
``GROUP_DRIVER_LOG_LEVEL`` sets the Python clients' log level; ``GROUP_DRIVER_RDKAFKA_DEBUG`` is
librdkafka's ``debug`` setting (``cgrp`` shows every commit, join and sync on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
from typing import Any

POLL_MS = 200


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


class Commands:
    """The ``close`` command from stdin (EOF counts as close), seen by the polling loop."""

    def __init__(self) -> None:
        self.close = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        self.close.set()


def report(where: str, name: str, code: int | None, retriable: bool) -> None:
    emit("client_error", where=where, name=name, code=code, retriable=retriable)


def report_exception(where: str, exc: BaseException) -> None:
    """A kafka-python or aiokafka exception: its class, Kafka code (``errno``) and ``.retriable``."""
    code = getattr(exc, "errno", None)
    report(
        where,
        type(exc).__name__,
        code if isinstance(code, int) else None,
        bool(getattr(exc, "retriable", False)),
    )


def watch_response_codes(errors_module: Any) -> None:
    """Report every non-zero error code the library meets in a broker answer.

    kafka-python and aiokafka turn each answer's error code into an exception class through
    ``errors.for_code`` (looked up on the module at every call), and retry many of them without
    telling the application. Wrapping that one function sees them all; it still returns the
    library's own class, so the client behaves exactly as it would unwatched.
    """
    original = errors_module.for_code

    def for_code(error_code: int) -> Any:
        error_class = original(error_code)
        if error_code:
            report(
                "response", error_class.__name__, error_code, bool(getattr(error_class, "retriable", False))
            )
        return error_class

    errors_module.for_code = for_code


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=["kafka-python", "confluent", "aiokafka"], required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--client-id", default="group-driver")
    parser.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic")
    return parser.parse_args()


def run_kafka_python(args: argparse.Namespace, commands: Commands) -> None:
    import kafka
    import kafka.errors
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    options: dict[str, Any] = {
        "bootstrap_servers": args.bootstrap,
        "group_id": args.group,
        "client_id": args.client_id,
        # Commits are explicit, after every batch. Auto-commit is on only for the commit kafka-python
        # makes itself before a revocation (3.x cannot commit from a synchronous listener).
        "enable_auto_commit": True,
        "auto_commit_interval_ms": 3_600_000,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "partition_assignment_strategy": [assignors[args.assignor]],
    }
    if args.instance_id:
        options["group_instance_id"] = args.instance_id
    watch_response_codes(kafka.errors)
    consumer = KafkaConsumer(**options)
    emit("started", version=kafka.__version__)

    def generation() -> int | None:
        current = getattr(consumer._coordinator, "_generation", None)
        return getattr(current, "generation_id", None)

    def commit() -> None:
        positions = {
            tp.partition: meta.offset for tp, meta in consumer._subscription.all_consumed_offsets().items()
        }
        if not positions:
            return
        try:
            consumer.commit()
        except Exception as exc:  # the driver reports and survives every commit failure
            report_exception("commit", exc)
            emit("error", message=f"commit: {exc!r}")
            return
        emit("committed", offsets=positions)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit(
                "assigned",
                partitions=sorted(tp.partition for tp in consumer.assignment()),
                generation=generation(),
            )

    # Learn the topic's partitions before joining, so the client's metadata knows the topic. This does
    # not spare kafka-python 3.0.12 its rejoin after the first assignment (its coordinator's metadata
    # snapshot is rebuilt only at the next refresh; see tests/support/kafka_python_stall.py).
    while not consumer.partitions_for_topic(args.topic):
        time.sleep(0.05)
    consumer.subscribe([args.topic], listener=Listener())
    while not commands.close.is_set():
        try:
            batches = consumer.poll(timeout_ms=POLL_MS)
        except Exception as exc:  # reported, then the member goes on polling
            report_exception("poll", exc)
            time.sleep(POLL_MS / 1000)
            continue
        records = [[r.partition, r.offset] for rs in batches.values() for r in rs]
        if records:
            emit("consumed", records=records)
            commit()
    consumer.close()
    emit("closed")


def run_confluent(args: argparse.Namespace, commands: Commands) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    def report_kafka_error(where: str, error: KafkaError) -> None:
        report(where, error.name(), error.code(), error.retriable())

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": args.heartbeat_ms,
        "partition.assignment.strategy": args.assignor,
        "error_cb": lambda error: report_kafka_error("error_cb", error),
    }
    if os.environ.get("GROUP_DRIVER_RDKAFKA_DEBUG"):
        config["debug"] = os.environ["GROUP_DRIVER_RDKAFKA_DEBUG"]
    if args.group_protocol == "consumer":
        # KIP-848: the coordinator owns timeouts and assignment; the classic settings are refused.
        for classic_only in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
            del config[classic_only]
        config["group.protocol"] = "consumer"
        config["group.remote.assignor"] = args.assignor
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    emit("started")
    owned: set[int] = set()

    # A commit the group refuses because it is rebalancing is not retried by librdkafka (its
    # OffsetCommit handler only reports the error), and a cooperative member keeps consuming while
    # it rejoins: its commit after the last records then travels behind its own parked JoinGroup on
    # the coordinator connection, which (as in Kafka) answers it only once the join completes, so
    # with the old generation: ILLEGAL_GENERATION (or REBALANCE_IN_PROGRESS before its SyncGroup).
    # When the member keeps those partitions nothing is revoked and nothing new arrives, so without
    # a retry their last offsets are never committed. As Kafka's RebalanceInProgressException
    # advises, the driver commits again (the partitions it still owns) until the group accepts it.
    refused_in_rebalance = {KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION}
    refused = False  # the last commit (from the loop or a revocation) was refused for a rebalance

    def commit() -> None:
        """Commit the stored offsets of the assignment; ``refused`` says whether to commit again."""
        nonlocal refused
        try:
            done = consumer.commit(asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() != KafkaError._NO_OFFSET:  # nothing to commit is no error
                report_kafka_error("commit", error)
                emit("error", message=f"commit: {exc}")
            refused = error.code() in refused_in_rebalance
            return
        refused = False
        for tp in done or []:
            if tp.error is not None:
                report_kafka_error("commit", tp.error)
                refused = refused or tp.error.code() in refused_in_rebalance
        emit(
            "committed",
            offsets={tp.partition: tp.offset for tp in done or [] if tp.offset >= 0 and tp.error is None},
        )

    def on_assign(_: Any, partitions: list[TopicPartition]) -> None:
        owned.update(tp.partition for tp in partitions)
        emit("assigned", partitions=sorted(owned), generation=None)

    def on_revoke(_: Any, partitions: list[TopicPartition]) -> None:
        commit()
        owned.difference_update(tp.partition for tp in partitions)
        emit("revoked", partitions=sorted(tp.partition for tp in partitions))

    def on_lost(_: Any, partitions: list[TopicPartition]) -> None:
        owned.difference_update(tp.partition for tp in partitions)
        emit("revoked", partitions=sorted(tp.partition for tp in partitions), lost=True)

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    while not commands.close.is_set():
        messages = consumer.consume(num_messages=500, timeout=POLL_MS / 1000)
        records = []
        for message in messages:
            if message.error():
                report_kafka_error("message", message.error())
                emit("error", message=str(message.error()))
                continue
            records.append([message.partition(), message.offset()])
        if records:
            emit("consumed", records=records)
        elif refused:
            emit("commit_retry")
        if records or refused:
            commit()
    consumer.close()
    emit("closed")


async def run_aiokafka(args: argparse.Namespace, commands: Commands) -> None:
    import aiokafka.errors
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    watch_response_codes(aiokafka.errors)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        partition_assignment_strategy=(assignors[args.assignor],),
        group_instance_id=args.instance_id,
    )

    async def commit() -> None:
        positions = {tp.partition: await consumer.position(tp) for tp in consumer.assignment()}
        if not positions:
            return
        try:
            await consumer.commit()
        except Exception as exc:  # the driver reports and survives every commit failure
            report_exception("commit", exc)
            emit("error", message=f"commit: {exc!r}")
            return
        emit("committed", offsets=positions)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            await commit()
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            generation = getattr(consumer._coordinator, "generation", None)
            emit(
                "assigned",
                partitions=sorted(tp.partition for tp in consumer.assignment()),
                generation=generation,
            )

    consumer.subscribe([args.topic], listener=Listener())
    await consumer.start()
    emit("started")
    while not commands.close.is_set():
        try:
            batches = await consumer.getmany(timeout_ms=POLL_MS)
        except Exception as exc:  # reported, then the member goes on polling
            report_exception("poll", exc)
            await asyncio.sleep(POLL_MS / 1000)
            continue
        records = [[r.partition, r.offset] for rs in batches.values() for r in rs]
        if records:
            emit("consumed", records=records)
            await commit()
    await consumer.stop()
    emit("closed")


def main() -> None:
    args = parse_args()
    level = os.environ.get("GROUP_DRIVER_LOG_LEVEL", "WARNING")
    logging.basicConfig(stream=sys.stderr, level=level, format="%(asctime)s %(name)s %(message)s")
    commands = Commands()
    if args.client == "kafka-python":
        run_kafka_python(args, commands)
    elif args.client == "confluent":
        run_confluent(args, commands)
    else:
        asyncio.run(run_aiokafka(args, commands))


if __name__ == "__main__":
    main()
