"""Transactional offset commits in the group shard: pending until the marker, KIP-447 checks, replay.

The shard is pure; these tests play the runtime's part: a TxnOffsetCommit's records are "appended"
by replaying them with the producer (``replay(record, -1, producer_id, epoch)``, what the runner
does once its transactional batch is durable), a marker by ``replay_end_transaction_marker``. A
restart is a fresh shard replaying the same records in the same order.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from tests.coordinator.test_shard import DictTimer, subscription

from kcoord.coordinator.classic.config import ClassicGroupConfig
from kcoord.coordinator.classic.messages import DeleteGroupResult
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from kcoord.coordinator.offsets import (
    OffsetCommitPartition,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetFetchResponse,
    OffsetFetchTopic,
)
from kcoord.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
)
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.coordinator.txn_offset_commit import TxnOffsetCommitRequest

START_MS = 1_000_000
RETENTION_MS = 60_000
TOPICS = {"orders": 3}
PRODUCER = 4000
OTHER_PRODUCER = 4001


class TxnHarness:
    """One shard, and the log it would have written (records with their producer, and markers)."""

    def __init__(self) -> None:
        self.now = START_MS
        self.shard = self._new_shard()
        self.log: list[tuple[str, Any, int, int]] = []
        """("record", record, producer id, epoch) or ("marker", committed, producer id, epoch)."""

    @staticmethod
    def _new_shard() -> GroupCoordinatorShard:
        return GroupCoordinatorShard(
            DictTimer(),
            classic_config=ClassicGroupConfig(initial_rebalance_delay_ms=0),
            offset_metadata_max_bytes=4096,
            offsets_retention_ms=RETENTION_MS,
            topic_exists=lambda topic, partition: 0 <= partition < TOPICS.get(topic, 0),
            partition_count=TOPICS.get,
        )

    def txn_commit(
        self,
        group: str,
        offsets: dict[int, int],
        *,
        producer: int = PRODUCER,
        epoch: int = 0,
        generation: int = -1,
        member: str = "",
        instance: str | None = None,
    ) -> dict[int, ErrorCode]:
        """TxnOffsetCommit of ``orders`` partitions, appended for the producer; the codes by partition."""
        request = TxnOffsetCommitRequest(
            transactional_id="t",
            group_id=group,
            producer_id=producer,
            producer_epoch=epoch,
            topics=[OffsetCommitTopic("orders", [OffsetCommitPartition(p, o) for p, o in offsets.items()])],
            generation_id=generation,
            member_id=member,
            group_instance_id=instance,
        )
        result = self.shard.commit_transactional_offsets(request, "txn", self.now)
        for record in result.records:
            self.shard.replay(record, -1, producer, epoch)
            self.log.append(("record", record, producer, epoch))
        response = dict(result.responses)["txn"]
        assert isinstance(response, OffsetCommitResponse)
        return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}

    def plain_commit(self, group: str, partition: int, offset: int) -> None:
        from kcoord.coordinator.offsets import OffsetCommitRequest

        request = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            api_version=8,
            topics=[OffsetCommitTopic("orders", [OffsetCommitPartition(partition, offset)])],
        )
        result = self.shard.commit_offsets(request, "commit", self.now)
        self.shard.on_appended(list(result.records))
        self.log.extend(("record", r, -1, -1) for r in result.records)

    def marker(self, committed: bool, producer: int = PRODUCER, epoch: int = 0) -> None:
        self.shard.replay_end_transaction_marker(producer, epoch, committed)
        self.log.append(("marker", committed, producer, epoch))

    def replay_record(self, record: CoordinatorRecord) -> None:
        self.shard.replay(record)
        self.log.append(("record", record, -1, -1))

    def restart(self) -> None:
        """A fresh shard replays the log, as loading the partition after a restart does."""
        self.shard = self._new_shard()
        for kind, item, producer, epoch in self.log:
            if kind == "marker":
                self.shard.replay_end_transaction_marker(producer, epoch, item)
            else:
                self.shard.replay(item, 0, producer, epoch)
        self.shard.on_loaded(self.now)

    def fetch(self, group: str, *partitions: int, stable: bool = False) -> dict[int, tuple[int, ErrorCode]]:
        topics = [OffsetFetchTopic("orders", list(partitions))] if partitions else None
        response = self.shard.fetch_offsets(group, topics, stable)
        assert isinstance(response, OffsetFetchResponse)
        return {
            p.partition_index: (p.committed_offset, p.error_code)
            for t in response.topics
            for p in t.partitions
        }


def member_group(group: str, generation: int, member: str, instance: str | None = None) -> CoordinatorRecord:
    return CoordinatorRecord(
        GroupMetadataKey(group),
        GroupMetadataValue(
            protocol_type="consumer",
            generation=generation,
            protocol="range",
            leader=member,
            current_state_timestamp=START_MS,
            members=(
                MemberMetadata(
                    member, instance, "client", "/127.0.0.1", 30_000, 10_000, subscription("orders"), b""
                ),
            ),
        ),
    )


OK = ErrorCode.none
UNSTABLE = ErrorCode.unstable_offset_commit


def test_pending_offsets_are_invisible_and_unstable_until_the_commit_marker() -> None:
    """A TxnOffsetCommit's offsets stay out of OffsetFetch (require_stable: UNSTABLE_OFFSET_COMMIT, per
    partition) until the producer's commit marker, which makes them the committed offsets."""
    h = TxnHarness()
    h.plain_commit("g", 1, 7)
    assert h.txn_commit("g", {0: 10}) == {0: OK}
    assert h.fetch("g", 0, 1) == {0: (-1, OK), 1: (7, OK)}
    assert h.fetch("g", 0, 1, stable=True) == {0: (-1, UNSTABLE), 1: (7, OK)}
    assert h.fetch("g", stable=True) == {1: (7, OK)}, "an all-topics fetch lists committed partitions only"
    h.marker(committed=True)
    assert h.fetch("g", 0, 1, stable=True) == {0: (10, OK), 1: (7, OK)}
    assert not h.shard.offsets.pending.has_group("g")


def test_an_abort_marker_drops_the_pending_offsets_and_keeps_the_committed_ones() -> None:
    """After an abort the partition answers what was committed before the transaction."""
    h = TxnHarness()
    h.plain_commit("g", 0, 5)
    h.txn_commit("g", {0: 50, 2: 52})
    h.marker(committed=False)
    assert h.fetch("g", 0, 2, stable=True) == {0: (5, OK), 2: (-1, OK)}
    assert not h.shard.offsets.pending.has_group("g")


def test_a_marker_of_another_producer_leaves_the_pending_offsets_alone() -> None:
    """Only the marker of the producer that wrote the offsets settles them."""
    h = TxnHarness()
    h.txn_commit("g", {0: 10})
    h.marker(committed=True, producer=OTHER_PRODUCER)
    assert h.fetch("g", 0, stable=True) == {0: (-1, UNSTABLE)}


def test_a_restart_mid_transaction_keeps_the_offsets_pending_and_the_marker_then_commits_them() -> None:
    """Replaying the log (the same records with their producer) rebuilds the pending offsets; a marker
    after the restart commits them, and a restart after the marker shows them committed."""
    h = TxnHarness()
    h.plain_commit("g", 1, 3)
    h.txn_commit("g", {0: 10, 1: 11})
    h.restart()
    assert h.fetch("g", 0, 1, stable=True) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
    assert h.fetch("g", 0, 1) == {0: (-1, OK), 1: (3, OK)}
    assert str(h.shard.classic.group_state("g")) == "Empty", "the group exists after the load"
    h.marker(committed=True)
    assert h.fetch("g", 0, 1, stable=True) == {0: (10, OK), 1: (11, OK)}
    h.restart()
    assert h.fetch("g", 0, 1, stable=True) == {0: (10, OK), 1: (11, OK)}
    (settled,) = h.shard.offsets.settled_transactions("g")
    assert (settled.producer_id, settled.committed, settled.partitions) == (PRODUCER, True, 2)


def test_a_restart_after_an_abort_marker_shows_the_offsets_dropped() -> None:
    """An aborted transaction's offsets never appear, live or after replaying the log."""
    h = TxnHarness()
    h.txn_commit("g", {0: 10})
    h.marker(committed=False)
    h.restart()
    assert h.fetch("g", 0, stable=True) == {0: (-1, OK)}


def test_a_plain_commit_after_the_transactional_one_wins_at_the_marker() -> None:
    """Kafka keeps the most recent commit of a partition: a plain commit written after the pending
    offset is not overwritten by the transaction's commit marker (live and after a restart)."""
    h = TxnHarness()
    h.txn_commit("g", {0: 10})
    h.plain_commit("g", 0, 20)
    h.marker(committed=True)
    assert h.fetch("g", 0) == {0: (20, OK)}
    h.restart()
    assert h.fetch("g", 0) == {0: (20, OK)}


def test_of_two_transactions_the_later_written_offset_wins_whatever_the_marker_order() -> None:
    """Two producers' pending offsets for one partition: the one written last ends committed."""
    for first_marker in (PRODUCER, OTHER_PRODUCER):
        h = TxnHarness()
        h.txn_commit("g", {0: 10}, producer=PRODUCER)
        h.txn_commit("g", {0: 20}, producer=OTHER_PRODUCER)
        second_marker = OTHER_PRODUCER if first_marker == PRODUCER else PRODUCER
        h.marker(committed=True, producer=first_marker)
        h.marker(committed=True, producer=second_marker)
        assert h.fetch("g", 0) == {0: (20, OK)}, f"first marker {first_marker}"


def test_a_tombstone_drops_the_pending_offsets_of_its_partition() -> None:
    """OffsetDelete or DeleteGroups' tombstone also removes a transaction's pending offset there."""
    h = TxnHarness()
    h.txn_commit("g", {0: 10, 1: 11})
    h.replay_record(CoordinatorRecord(OffsetCommitKey("g", "orders", 0), None))
    assert h.fetch("g", 0, 1, stable=True) == {0: (-1, OK), 1: (-1, UNSTABLE)}
    h.marker(committed=True)
    assert h.fetch("g", 0, 1) == {0: (-1, OK), 1: (11, OK)}


def test_delete_groups_writes_tombstones_for_partitions_only_a_transaction_holds() -> None:
    """DeleteGroups of a group with pending offsets tombstones those partitions too, as Kafka does."""
    h = TxnHarness()
    h.plain_commit("g", 1, 3)
    h.txn_commit("g", {0: 10, 1: 11})
    result = h.shard.delete_groups(["g"], "delete", h.now)
    assert result.responses == [("delete", [DeleteGroupResult("g", OK)])]
    offsets_keys = [r.key for r in result.records if isinstance(r.key, OffsetCommitKey)]
    assert offsets_keys == [OffsetCommitKey("g", "orders", 1), OffsetCommitKey("g", "orders", 0)]


def test_expiry_keeps_offsets_and_the_group_while_a_transaction_holds_them() -> None:
    """An expired offset with a pending transactional offset on its partition is kept, and the group
    is not deleted while a transaction holds offsets of it; after the marker both expire as usual."""
    h = TxnHarness()
    h.plain_commit("g", 0, 5)
    h.txn_commit("g", {0: 10})
    late = START_MS + RETENTION_MS + 1
    assert h.shard.expire_offsets(late).records == []
    h.marker(committed=False)
    expired = h.shard.expire_offsets(late).records
    assert [r.key for r in expired] == [OffsetCommitKey("g", "orders", 0), GroupMetadataKey("g")]


def test_a_group_with_only_pending_offsets_is_not_deleted_with_its_expired_offsets() -> None:
    """Expiring a group's last committed offset does not delete the group while another partition is
    pending in a transaction (Kafka: no group removal under open transactions)."""
    h = TxnHarness()
    h.plain_commit("g", 0, 5)
    h.txn_commit("g", {1: 10})
    late = START_MS + RETENTION_MS + 1
    expired = h.shard.expire_offsets(late).records
    assert [r.key for r in expired] == [OffsetCommitKey("g", "orders", 0)]


def test_a_missing_group_is_created_for_generation_minus_one_and_refused_otherwise() -> None:
    """KIP-447 for a group that does not exist: generation -1 makes a simple group, a generation
    >= 0 is ILLEGAL_GENERATION and nothing is written."""
    h = TxnHarness()
    assert h.txn_commit("fresh", {0: 1}) == {0: OK}
    assert str(h.shard.classic.group_state("fresh")) == "Empty"
    assert h.txn_commit("absent", {0: 1}, generation=3, member="m") == {0: ErrorCode.illegal_generation}
    assert not h.shard.classic.has_group("absent")
    assert not h.shard.offsets.pending.has_group("absent")


def test_kip_447_checks_member_generation_and_instance_against_the_group() -> None:
    """A member of the current generation commits; an unknown member, an old generation and a
    fenced static instance are refused with Kafka's codes, and nothing is pending for them."""
    h = TxnHarness()
    h.replay_record(member_group("g", 5, "m-1", "static-1"))
    assert h.txn_commit("g", {0: 1}, generation=5, member="m-1", instance="static-1") == {0: OK}
    h.marker(committed=True)
    refused = {
        "unknown member": (
            h.txn_commit("g", {0: 2}, generation=5, member="ghost"),
            ErrorCode.unknown_member_id,
        ),
        "old generation": (
            h.txn_commit("g", {0: 2}, generation=4, member="m-1", instance="static-1"),
            ErrorCode.illegal_generation,
        ),
        "fenced instance": (
            h.txn_commit("g", {0: 2}, generation=5, member="m-zombie", instance="static-1"),
            ErrorCode.fenced_instance_id,
        ),
    }
    for case, (codes, expected) in refused.items():
        assert codes == {0: expected}, case
    assert not h.shard.offsets.pending.has_group("g")
    assert h.fetch("g", 0) == {0: (1, OK)}


def test_an_older_epoch_of_a_producer_with_pending_offsets_is_fenced() -> None:
    """A TxnOffsetCommit with an epoch below the one the producer's pending offsets carry answers
    INVALID_PRODUCER_EPOCH and writes nothing."""
    h = TxnHarness()
    h.txn_commit("g", {0: 10}, epoch=3)
    assert h.txn_commit("g", {0: 99}, epoch=2) == {0: ErrorCode.invalid_producer_epoch}
    h.marker(committed=True, epoch=3)
    assert h.fetch("g", 0) == {0: (10, OK)}


def test_unknown_partitions_are_answered_per_partition() -> None:
    """A partition the broker does not host gets UNKNOWN_TOPIC_OR_PARTITION; the others are pending."""
    h = TxnHarness()
    assert h.txn_commit("g", {0: 1, 7: 2}) == {0: OK, 7: ErrorCode.unknown_topic_or_partition}
    assert h.shard.offsets.pending.partitions("g") == [("orders", 0)]


def test_kip_447_for_a_consumer_group_checks_the_member_and_its_epoch() -> None:
    """To a KIP-848 consumer group the generation is the member's epoch: the current one commits, an
    older one is ILLEGAL_GENERATION (not STALE_MEMBER_EPOCH, as Kafka maps it), an unknown member
    UNKNOWN_MEMBER_ID."""
    h = TxnHarness()
    request = ConsumerHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, subscribed_topics=("orders",), owned={}, client_id="c"
    )
    beat = h.shard.consumer_heartbeat(request, "beat", h.now)
    h.shard.on_appended(list(beat.records))
    answer = dict(beat.responses)["beat"]
    assert isinstance(answer, ConsumerHeartbeatResponse) and answer.member_epoch > 0
    epoch = answer.member_epoch
    assert h.txn_commit("g", {0: 1}, generation=epoch, member="m") == {0: OK}
    assert h.txn_commit("g", {0: 2}, generation=epoch - 1, member="m") == {0: ErrorCode.illegal_generation}
    assert h.txn_commit("g", {0: 2}, generation=epoch, member="x") == {0: ErrorCode.unknown_member_id}
    h.marker(committed=True)
    assert h.fetch("g", 0) == {0: (1, OK)}
