"""``kcoord topics``, ``produce`` and ``consume`` against a live server, checked with confluent-kafka:
what the CLI writes real clients read (keys, headers, partitions), and the reverse, alone and in a group."""

from __future__ import annotations

import io
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kcoord.cli import main
from tests.cli.reset_scenario import committed, group_consumer, wait_until_assigned
from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

_names = itertools.count()
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KcoordProcess]:
    process = KcoordProcess(Path(tmp_path_factory.mktemp("topics")) / "data").start()
    try:
        yield process
    finally:
        process.kill()


def cli(server: KcoordProcess, *args: str, stdin: str | None = None) -> int:
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        return main([*args, "--bootstrap", server.bootstrap])
    finally:
        sys.stdin = saved


def new_topic(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def read_all(
    bootstrap: str, topic: str, partitions: int, expected: int
) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    """(partition, key, value, headers) of every record, read by a confluent-kafka consumer."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    found = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(found) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            found.append((msg.partition(), msg.key(), msg.value(), list(msg.headers() or [])))
    finally:
        consumer.close()
    return sorted(found, key=lambda r: (r[0], r[2] or b""))


def test_topic_lifecycle_and_its_mistakes(server: KcoordProcess, capsys: pytest.CaptureFixture[str]) -> None:
    """create, list, describe, alter-partitions and delete work; each mistake exits 1 naming Kafka's error."""
    topic = new_topic("life")
    assert (
        cli(server, "topics", "create", topic, "--partitions", "2", "--config", "retention.ms=3600000") == 0
    )
    assert capsys.readouterr().out.strip() == f"Created topic {topic} with 2 partition(s)"
    assert cli(server, "topics", "list", "--json") == 0
    assert {"topic": topic, "partitions": 2} in json.loads(capsys.readouterr().out)
    assert cli(server, "topics", "describe", topic, "--json") == 0
    described = json.loads(capsys.readouterr().out)
    assert described["configs"] == {"retention.ms": "3600000"}
    assert [
        (r["partition"], r["log_start_offset"], r["log_end_offset"]) for r in described["partitions"]
    ] == [
        (0, 0, 0),
        (1, 0, 0),
    ]
    assert cli(server, "topics", "alter-partitions", topic, "--partitions", "4") == 0
    assert capsys.readouterr().out.strip() == f"Topic {topic} now has 4 partition(s)"

    mistakes = [
        (["topics", "create", topic], "TOPIC_ALREADY_EXISTS"),
        (["topics", "create", new_topic("bad"), "--partitions", "0"], "INVALID_PARTITIONS"),
        (["topics", "create", new_topic("bad"), "--config", "retention.ms"], "expected NAME=VALUE"),
        (["topics", "create", new_topic("bad"), "--config", "no.such.config=1"], "INVALID_CONFIG"),
        (["topics", "alter-partitions", topic, "--partitions", "3"], "INVALID_PARTITIONS"),
        (["topics", "describe", "no-such-topic"], "UNKNOWN_TOPIC_OR_PARTITION"),
        (["topics", "alter-partitions", "no-such-topic", "--partitions", "3"], "UNKNOWN_TOPIC_OR_PARTITION"),
    ]
    for args, error in mistakes:
        assert cli(server, *args) == 1, args
        err = capsys.readouterr().err
        assert err.startswith("kcoord: ") and error in err, (args, err)

    assert cli(server, "topics", "delete", topic) == 0
    assert capsys.readouterr().out.strip() == f"Deleted topic {topic}"
    assert cli(server, "topics", "delete", topic) == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in capsys.readouterr().err
    assert cli(server, "topics", "list") == 0
    assert topic not in capsys.readouterr().out.split()


def test_produced_lines_reach_a_real_consumer_with_keys_headers_and_kafkas_partitions(
    server: KcoordProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """Keyed lines land where librdkafka's murmur2 puts their keys, with their headers; JSON lines too."""
    topic = new_topic("produce")
    create_topic(server.bootstrap, topic, 4)
    keys = [f"key-{i}" for i in range(12)]
    lines = "".join(f"{k}\tvalue of {k}\n" for k in keys)
    assert cli(server, "produce", topic, "--key-separator", "\t", "--header", "origin=cli", stdin=lines) == 0
    assert capsys.readouterr().err.strip() == f"produced 12 record(s) to {topic}"
    doc = {"key": None, "value": "from json", "headers": {"h": "v"}, "partition": 3}
    assert cli(server, "produce", topic, "--format", "json", stdin=json.dumps(doc) + "\n") == 0

    # Where librdkafka's murmur2 partitioner (Java's default) puts the same keys.
    expected_partition = {}
    producer = Producer({"bootstrap.servers": server.bootstrap, "partitioner": "murmur2_random"})
    check = new_topic("placement")
    create_topic(server.bootstrap, check, 4)
    for key in keys:
        producer.produce(check, key=key.encode(), value=b"")
    assert producer.flush(DEADLINE_S) == 0
    for partition, key, _, _ in read_all(server.bootstrap, check, 4, len(keys)):
        assert key is not None
        expected_partition[key] = partition

    records = read_all(server.bootstrap, topic, 4, len(keys) + 1)
    keyed = [r for r in records if r[1] is not None]
    assert sorted((r[1], r[2], r[0]) for r in keyed) == sorted(
        (k.encode(), f"value of {k}".encode(), expected_partition[k.encode()]) for k in keys
    )
    assert all(r[3] == [("origin", b"cli")] for r in keyed)
    assert [r for r in records if r[1] is None] == [(3, None, b"from json", [("h", b"v")])]


def test_consume_prints_what_a_real_producer_wrote(
    server: KcoordProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """Records from confluent-kafka (lz4-compressed, with keys and headers) print as text and as JSON."""
    topic = new_topic("consume")
    create_topic(server.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": server.bootstrap, "compression.type": "lz4", "linger.ms": 20})
    for i in range(6):
        producer.produce(
            topic,
            key=f"k{i}",
            value=f"v{i}",
            partition=i % 2,
            headers=[("n", str(i).encode())],
            timestamp=1_700_000_000_000 + i,
        )
    assert producer.flush(DEADLINE_S) == 0

    assert (
        cli(server, "consume", topic, "--from-beginning", "--max-messages", "6", "--key-separator", "=") == 0
    )
    assert sorted(capsys.readouterr().out.splitlines()) == [f"k{i}=v{i}" for i in range(6)]
    assert cli(server, "consume", topic, "--from-beginning", "--max-messages", "6", "--format", "json") == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(
        (p["partition"], p["offset"], p["key"], p["value"], p["headers"], p["timestamp"]) for p in printed
    ) == sorted((i % 2, i // 2, f"k{i}", f"v{i}", {"n": str(i)}, 1_700_000_000_000 + i) for i in range(6))
    # Without --from-beginning a consumer starts at the end: nothing old, so it idles out.
    assert cli(server, "consume", topic, "--idle-timeout-ms", "1000") == 0
    assert capsys.readouterr().out == ""


def test_consume_in_a_group_commits_and_real_consumers_resume(
    server: KcoordProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """``consume --group`` commits what it printed; a confluent-kafka member of the group resumes after it."""
    topic, group = new_topic("grp"), new_topic("grp-group")
    create_topic(server.bootstrap, topic, 2)
    assert cli(server, "produce", topic, "--partition", "0", stdin="".join(f"a{i}\n" for i in range(5))) == 0
    assert cli(server, "produce", topic, "--partition", "1", stdin="".join(f"b{i}\n" for i in range(5))) == 0
    capsys.readouterr()
    assert (
        cli(server, "consume", topic, "--group", group, "--from-beginning", "--idle-timeout-ms", "1500") == 0
    )
    assert sorted(capsys.readouterr().out.splitlines()) == sorted(
        [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)]
    )
    assert committed(server.bootstrap, group) == {(topic, 0): 5, (topic, 1): 5}

    producer = Producer({"bootstrap.servers": server.bootstrap})
    producer.produce(topic, value=b"a5", partition=0)
    producer.produce(topic, value=b"b5", partition=1)
    assert producer.flush(DEADLINE_S) == 0
    consumer = group_consumer(server.bootstrap, group, topic)
    seen = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(seen) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    assert sorted(seen) == [(0, 5, b"a5"), (1, 5, b"b5")]


def test_consume_shares_a_group_with_a_real_consumer(
    server: KcoordProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``kcoord consume --group`` process and a confluent-kafka consumer split the partitions (range)."""
    topic, group = new_topic("mixed"), new_topic("mixed-group")
    create_topic(server.bootstrap, topic, 4)
    consumer = group_consumer(server.bootstrap, group, topic)
    process = None
    try:
        wait_until_assigned(consumer)
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kcoord",
                "consume",
                topic,
                "--group",
                group,
                "--bootstrap",
                server.bootstrap,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + DEADLINE_S
        while len(consumer.assignment()) != 2:
            assert time.monotonic() < deadline, f"no rebalance to two members: {consumer.assignment()}"
            consumer.poll(0.2)
        assert cli(server, "groups", "describe", group, "--json") == 0
        described = json.loads(capsys.readouterr().out)
        assert described["state"] == "Stable" and len(described["members"]) == 2
        owned = sorted(p for m in described["members"] for p in m["assignment"][topic])
        assert owned == [0, 1, 2, 3]
        process.terminate()
        assert process.wait(DEADLINE_S) == 0
        deadline = time.monotonic() + DEADLINE_S
        while len(consumer.assignment()) != 4:
            assert time.monotonic() < deadline, "the CLI member's partitions never came back"
            consumer.poll(0.2)
    finally:
        if process is not None and process.poll() is None:
            process.kill()
        consumer.close()


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["produce", "no-such-topic"], "x\n", "topic 'no-such-topic': UNKNOWN_TOPIC_OR_PARTITION"),
        (["produce", "{topic}", "--format", "json"], "{not json\n", "line 1: not JSON"),
        (
            ["produce", "{topic}", "--format", "json"],
            '{"key": "k"}\n',
            'line 1: expected an object with "value"',
        ),
        (["produce", "{topic}", "--key-separator", ":"], "ok:1\nnope\n", "line 2: no key separator ':'"),
        (["produce", "{topic}", "--partition", "9"], "x\n", "has no partition 9 (it has 1)"),
        (["produce", "{topic}", "--header", "novalue"], "x\n", "--header 'novalue': expected NAME=VALUE"),
        (["consume", "no-such-topic", "--max-messages", "1"], None, "UNKNOWN_TOPIC_OR_PARTITION"),
    ],
    ids=[
        "unknown-topic",
        "bad-json",
        "json-without-value",
        "missing-separator",
        "bad-partition",
        "bad-header",
        "consume-unknown",
    ],
)
def test_console_mistakes_exit_one_with_a_message(
    server: KcoordProcess,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    stdin: str | None,
    message: str,
) -> None:
    """Bad input to produce or consume exits 1 with one line naming the problem."""
    topic = new_topic("mistake")
    create_topic(server.bootstrap, topic, 1)
    assert cli(server, *[a.replace("{topic}", topic) for a in args], stdin=stdin) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"kcoord: {message}" or (err.startswith("kcoord: ") and message in err), err
