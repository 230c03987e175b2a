"""``kcoord transactions describe-producers|find-hanging|abort`` against a real kcoord holding a real
hanging transaction.

The hanging transaction is made as Kafka's happen: a confluent-kafka transactional producer writes to
a partition, then the coordinator's state of its transactional id is lost (kcoord is SIGKILLed and
the ``__transaction_state`` partition holding the id is deleted, as an unclean election loses it in
Kafka). After the restart the partition still holds the open transaction, rebuilt from its log, and
no coordinator will ever write its marker: the last stable offset is stuck at its first offset.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kcoord.cli import main
from kcoord.cli.admin_client import AdminClient
from kcoord.cli.hanging_transactions import hanging_among
from kcoord.cli.transaction_admin import ProducerState
from kcoord.coordinator.transactions import partition_for
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.transactions.clients import DEADLINE_S, raw, read_all, transactional_producer
from tests.transactions.pipeline import NO_REBOOTSTRAP

pytestmark = pytest.mark.clients

TOPIC = "hanging"
STATE_PARTITIONS = 3
HANGING_ID = "hang-tx"
LIVE_ID = "live-tx"
OLD_MS = 30 * 60_000
"""The records' timestamps lie this far back, so both transactions look older than 15 minutes."""


def _last_stable_offset(kcoord: KcoordProcess) -> int:
    """ListOffsets latest at read_committed: the partition's last stable offset."""
    body = {
        "replica_id": -1,
        "isolation_level": 1,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}],
            }
        ],
    }
    with raw(kcoord) as client:
        response = client.call(ApiKey.LIST_OFFSETS, 7, body)
    (part,) = response.topics[0].partitions
    assert part.error_code == 0
    return int(part.offset)


def _stable_offset_reaches(kcoord: KcoordProcess, wanted: int) -> bool:
    deadline = time.monotonic() + DEADLINE_S
    while _last_stable_offset(kcoord) != wanted:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["transactions", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _open(partition: int, producer_id: int) -> ProducerState:
    return ProducerState(TOPIC, partition, producer_id, 0, -1, 4, 0, 10)


def test_hanging_is_what_no_coordinator_will_end() -> None:
    """Kafka's filter: an open transaction hangs when its producer id has no transactional id, when
    the id's coordinator does not know it, or when it no longer counts the partition; it is ongoing
    only when the id's transaction still lists the partition."""
    candidates = [_open(0, 1), _open(0, 2), _open(1, 2), _open(0, 3), _open(0, 4)]
    transactional_ids = {2: "ongoing", 3: "forgotten", 4: "empty"}
    expected: dict[str, set[tuple[str, int]] | None] = {
        "ongoing": {(TOPIC, 0)},
        "forgotten": None,
        "empty": set(),
    }
    hanging = hanging_among(candidates, transactional_ids, expected)
    assert [(s.partition, s.producer_id) for s in hanging] == [(0, 1), (1, 2), (0, 3), (0, 4)]


def _hanging_transaction(kcoord_factory: type[KcoordProcess], data_dir: Path) -> tuple[KcoordProcess, int]:
    """A kcoord whose partition holds an open transaction its coordinator no longer knows; and that
    transaction's producer id."""
    kcoord = kcoord_factory(data_dir, {"transaction.state.log.num.partitions": str(STATE_PARTITIONS)}).start()
    create_topic(kcoord.bootstrap, TOPIC, partitions=1)
    producer = transactional_producer(kcoord.bootstrap, HANGING_ID, **NO_REBOOTSTRAP)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(TOPIC, value=b"hung-%d" % i, partition=0, timestamp=int(time.time() * 1000) - OLD_MS)
    assert producer.flush(DEADLINE_S) == 0
    with raw(kcoord) as client:
        described = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [HANGING_ID]})
    producer_id = int(described.transaction_states[0].producer_id)
    kcoord.kill()
    del producer  # the application is gone, and so is its coordinator's state:
    shutil.rmtree(data_dir / f"__transaction_state-{partition_for(HANGING_ID, STATE_PARTITIONS)}")
    return kcoord.start(), producer_id


def test_find_hanging_lists_the_lost_transaction_and_abort_unblocks_read_committed(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Of two old open transactions on a partition, find-hanging lists only the one whose coordinator
    lost it; abort --start-offset writes its abort marker, the last stable offset moves to the live
    transaction, and once that commits a read_committed consumer reads past the aborted records."""
    assert partition_for(LIVE_ID, STATE_PARTITIONS) != partition_for(HANGING_ID, STATE_PARTITIONS)
    kcoord, hanging_pid = _hanging_transaction(kcoord_factory, tmp_path / "data")
    live = transactional_producer(kcoord.bootstrap, LIVE_ID, **{"transaction.timeout.ms": 120_000})
    live.begin_transaction()
    for i in range(2):
        live.produce(TOPIC, value=b"live-%d" % i, partition=0, timestamp=int(time.time() * 1000) - OLD_MS)
    assert live.flush(DEADLINE_S) == 0
    assert _last_stable_offset(kcoord) == 0
    bootstrap = ("--bootstrap", kcoord.bootstrap)

    code, out, _ = _cli(
        capsys, "describe-producers", "--topic", TOPIC, "--partition", "0", "--json", *bootstrap
    )
    assert code == 0
    open_starts = {p["producer_id"]: p["start_offset"] for p in json.loads(out)}
    assert open_starts[hanging_pid] == 0 and sorted(open_starts.values()) == [0, 3]

    code, out, _ = _cli(capsys, "find-hanging", "--topic", TOPIC, "--json", *bootstrap)
    assert code == 0
    (hanging,) = json.loads(out)
    assert (hanging["producer_id"], hanging["start_offset"], hanging["coordinator_epoch"]) == (
        hanging_pid,
        0,
        -1,
    )
    with AdminClient(kcoord.host, kcoord.port) as admin:
        (broker,) = admin.metadata([]).brokers
    code, out, _ = _cli(capsys, "find-hanging", "--broker-id", str(broker.node_id), *bootstrap)
    assert code == 0
    (header, row) = out.splitlines()
    assert header.split()[:3] == ["TOPIC", "PARTITION", "PRODUCER-ID"]
    assert row.split()[:3] == [TOPIC, "0", str(hanging_pid)] and int(row.split()[-1]) >= 29
    code, out, _ = _cli(
        capsys, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "45", "--json", *bootstrap
    )
    assert (code, json.loads(out)) == (0, [])

    code, out, _ = _cli(
        capsys, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "0", *bootstrap
    )
    assert code == 0, out
    assert f"producer {hanging_pid}" in out
    assert _last_stable_offset(kcoord) == 3
    code, out, _ = _cli(capsys, "find-hanging", "--topic", TOPIC, "--partition", "0", "--json", *bootstrap)
    assert (code, json.loads(out)) == (0, [])

    live.commit_transaction(DEADLINE_S)  # answered once decided; the commit marker follows
    assert _stable_offset_reaches(kcoord, 7)  # 3 hung, 2 live, the abort marker, the commit marker
    assert read_all(kcoord.bootstrap, TOPIC, 1) == [b"live-0", b"live-1"]


def test_abort_errors_say_what_is_wrong_and_exit_1(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown topic or partition, an offset where no transaction starts, a missing or doubled way
    of naming the transaction, find-hanging without a scope, and markers the partition refuses as Kafka
    does (an older coordinator epoch, an older producer epoch) each exit 1 with the reason; a marker for
    a producer with no open transaction is written and answered as Kafka does (exit 0)."""
    kcoord, hanging_pid = _hanging_transaction(kcoord_factory, tmp_path / "data")
    where = ("--topic", TOPIC, "--partition", "0", "--bootstrap", kcoord.bootstrap)

    cases = [
        (["abort", "--topic", "nope", "--partition", "0", "--start-offset", "0"], "'nope' does not exist"),
        (["abort", "--topic", TOPIC, "--partition", "7", "--start-offset", "0"], "has no partition 7"),
        (["abort", *where[:4], "--start-offset", "2"], "no open transaction starts at offset 2 on hanging-0"),
        (["abort", *where[:4]], "name the transaction to abort with --start-offset"),
        (["abort", *where[:4], "--start-offset", "0", "--producer-id", "1"], "give one"),
        (["abort", *where[:4], "--producer-id", str(hanging_pid)], "needs --producer-epoch"),
        (["find-hanging"], "needs --topic or --broker-id"),
        (["find-hanging", "--broker-id", "1", "--partition", "0"], "--partition needs --topic"),
    ]
    for args, reason in cases:
        code, _, err = _cli(capsys, *args, "--bootstrap", kcoord.bootstrap)
        assert (code, reason in err) == (1, True), (args, err)
    assert "(open transactions start at: 0)" in _cli(capsys, "abort", *where, "--start-offset", "2")[2]

    explicit = ("--producer-id", str(hanging_pid), "--producer-epoch", "0", "--coordinator-epoch", "-1")
    assert _cli(capsys, "abort", *where, *explicit)[0] == 0
    assert _last_stable_offset(kcoord) == 4
    assert _cli(capsys, "abort", *where, *explicit)[0] == 0  # nothing open any more: Kafka writes it anyway
    assert _cli(capsys, "abort", *where, "--start-offset", "0")[0] == 1

    producer = ("--producer-id", str(hanging_pid))
    assert (
        _cli(capsys, "abort", *where, *producer, "--producer-epoch", "1", "--coordinator-epoch", "5")[0] == 0
    )
    code, _, err = _cli(
        capsys, "abort", *where, *producer, "--producer-epoch", "1", "--coordinator-epoch", "4"
    )
    assert code == 1 and "newer coordinator epoch than 4" in err and "TRANSACTION_COORDINATOR_FENCED" in err
    code, _, err = _cli(
        capsys, "abort", *where, *producer, "--producer-epoch", "0", "--coordinator-epoch", "5"
    )
    assert code == 1 and "newer epoch of producer" in err and "INVALID_PRODUCER_EPOCH" in err


def test_abort_without_cluster_action_is_refused(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With an authorizer, a principal without CLUSTER_ACTION on the cluster gets
    CLUSTER_AUTHORIZATION_FAILED for the abort marker (as Kafka's WriteTxnMarkers), exit 1 with the reason."""
    kcoord = kcoord_factory(
        tmp_path / "data",
        {
            "authorizer.class.name": "kcoord.security.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    ).start()
    create_topic(kcoord.bootstrap, TOPIC, partitions=1)
    grant = ["acls", "add", "--cluster", "--principal", "User:operator", "--operation", "ClusterAction"]
    assert main([*grant, "--bootstrap", kcoord.bootstrap]) == 0  # the cluster now has an ACL: not ANONYMOUS's
    capsys.readouterr()
    explicit = ("--producer-id", "5", "--producer-epoch", "0", "--coordinator-epoch", "0")
    code, _, err = _cli(
        capsys, "abort", "--topic", TOPIC, "--partition", "0", *explicit, "--bootstrap", kcoord.bootstrap
    )
    assert code == 1
    assert "needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED)" in err


def _stable_offset_error(kcoord: KcoordProcess, group: str) -> ErrorCode:
    """OffsetFetch v8 with ``require_stable`` of ``group``'s offset on ``TOPIC``-0: its partition error."""
    body = {
        "groups": [{"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
        "require_stable": True,
    }
    with raw(kcoord) as client:
        response = client.call(ApiKey.OFFSET_FETCH, 8, body)
    (part,) = response.groups[0].topics[0].partitions
    return ErrorCode(int(part.error_code))


def test_abort_on_the_offsets_log_drops_the_lost_transactions_pending_offsets(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A TxnOffsetCommit whose transaction's coordinator state is lost keeps the group's offsets
    unstable; abort on the group's ``__consumer_offsets`` partition goes to the group coordinator (as
    Kafka's WriteTxnMarkers does), which drops the pending offsets, so require_stable answers again."""
    data_dir = tmp_path / "data"
    kcoord = kcoord_factory(data_dir, {"transaction.state.log.num.partitions": str(STATE_PARTITIONS)}).start()
    create_topic(kcoord.bootstrap, TOPIC, partitions=1)
    consumer = Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": "lost-offsets"})
    producer = transactional_producer(kcoord.bootstrap, HANGING_ID, **NO_REBOOTSTRAP)
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        [TopicPartition(TOPIC, 0, 42)], consumer.consumer_group_metadata(), DEADLINE_S
    )
    consumer.close()
    with raw(kcoord) as client:
        (state,) = client.call(
            ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [HANGING_ID]}
        ).transaction_states
    ((topic, (offsets_partition,)),) = [(t.topic, tuple(t.partitions)) for t in state.topics]
    assert topic == "__consumer_offsets"
    kcoord.kill()
    del producer
    shutil.rmtree(data_dir / f"__transaction_state-{partition_for(HANGING_ID, STATE_PARTITIONS)}")
    kcoord.start()
    assert _stable_offset_error(kcoord, "lost-offsets") == ErrorCode.unstable_offset_commit

    naming = ("--producer-id", str(state.producer_id), "--producer-epoch", str(state.producer_epoch))
    where = ("--topic", "__consumer_offsets", "--partition", str(offsets_partition))
    code, _, err = _cli(
        capsys, "abort", *where, *naming, "--coordinator-epoch", "-1", "--bootstrap", kcoord.bootstrap
    )
    assert code == 0, err
    assert _stable_offset_error(kcoord, "lost-offsets") == ErrorCode.none
