"""Which share partitions of a group have state: initialise on first need (retried when unconfirmed),
recorded once confirmed, and deleted with the group's offsets or the group itself."""

from __future__ import annotations

import uuid

import pytest

from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.group_records import (
    ShareGroupRecord,
    decode_share_group_record,
    encode_share_group_key,
    encode_share_group_value,
)
from kcoord.coordinator.share.manager import ShareGroupManager, ShareHeartbeatRequest
from kcoord.coordinator.share.messages import ShareGroupChange
from kcoord.protocol.errors import ErrorCode, KafkaError

A, B = uuid.UUID(int=21), uuid.UUID(int=22)
TOPICS = {"a": (A, 2), "b": (B, 1)}


class NoTimer:
    def schedule(self, key: str, deadline_ms: int) -> None:
        return None

    def cancel(self, key: str) -> None:
        return None

    def deadline(self, key: str) -> int | None:
        return None


class Group:
    def __init__(self) -> None:
        self.manager = ShareGroupManager(
            ShareGroupConfig(initialize_retry_interval_ms=1_000), NoTimer(), TOPICS.get
        )
        self.log: list[ShareGroupRecord] = []

    def take(self, change: ShareGroupChange) -> ShareGroupChange:
        self.log.extend(change.records)  # type: ignore[arg-type]
        return change

    def beat(
        self, member: str, epoch: int, now_ms: int, topics: tuple[str, ...] | None = None
    ) -> ShareGroupChange:
        request = ShareHeartbeatRequest("g", member, epoch, None, topics)
        return self.take(self.manager.heartbeat(None, request, now_ms))

    def reloaded(self) -> ShareGroupManager:
        again = ShareGroupManager(ShareGroupConfig(), NoTimer(), TOPICS.get)
        for record in self.log:
            decoded = decode_share_group_record(
                encode_share_group_key(record.key), encode_share_group_value(record.value)
            )
            assert decoded is not None
            again.replay(decoded)
        return again


def test_a_joining_member_asks_for_its_partitions_state_once_until_the_retry_interval() -> None:
    """The first heartbeat needing a partition asks to initialise it at the group epoch; later heartbeats
    do not ask again until the retry interval passes without a confirmation."""
    g = Group()
    joined = g.beat("m1", 0, now_ms=0, topics=("a",))
    assert (joined.state_epoch, joined.initialize) == (1, {A: (0, 1)})
    assert g.beat("m1", 1, now_ms=999).initialize == {}
    assert g.beat("m1", 1, now_ms=1_000).initialize == {A: (0, 1)}


def test_confirmed_partitions_are_initialized_and_survive_a_reload() -> None:
    """After the share coordinator confirms, the partitions are initialized, never asked for again, and a
    reload of the records knows them."""
    g = Group()
    g.beat("m1", 0, now_ms=0, topics=("a", "b"))
    g.take(g.manager.initialized("g", {A: (0, 1)}))
    assert g.manager.initialized_partitions("g") == {A: (0, 1)}
    assert g.beat("m1", 1, now_ms=5_000).initialize == {B: (0,)}
    g.take(g.manager.initialized("g", {B: (0,)}))
    assert g.beat("m1", 1, now_ms=10_000).initialize == {}
    assert g.reloaded().initialized_partitions("g") == {A: (0, 1), B: (0,)}


def test_deleting_offsets_needs_an_empty_group_and_names_the_state_to_delete() -> None:
    """DeleteShareGroupOffsets: NON_EMPTY_GROUP with members; then the topic's partitions are to be deleted,
    it leaves the initialized set, and the share coordinator's confirmation clears it."""
    g = Group()
    g.beat("m1", 0, now_ms=0, topics=("a", "b"))
    g.take(g.manager.initialized("g", {A: (0, 1), B: (0,)}))
    with pytest.raises(KafkaError) as busy:
        g.manager.delete_offsets("g", {A: ("a", 2)})
    assert busy.value.code == ErrorCode.non_empty_group
    g.beat("m1", -1, now_ms=0)
    change = g.take(g.manager.delete_offsets("g", {A: ("a", 2)}))
    assert change.delete == {A: (0, 1)}
    assert g.manager.initialized_partitions("g") == {B: (0,)}
    assert g.take(g.manager.delete_offsets("g", {A: ("a", 2)})).delete == {
        A: (0, 1)
    }  # retried while deleting
    g.take(g.manager.deleted("g", [A]))
    assert g.take(g.manager.delete_offsets("g", {A: ("a", 2)})).delete == {}
    with pytest.raises(KafkaError) as missing:
        g.manager.delete_offsets("nope", {})
    assert missing.value.code == ErrorCode.group_id_not_found


def test_deleting_the_group_names_all_of_its_share_state() -> None:
    """DeleteGroups of a share group hands over every initialized and initializing partition to delete."""
    g = Group()
    g.beat("m1", 0, now_ms=0, topics=("a", "b"))
    g.take(g.manager.initialized("g", {A: (0,)}))
    g.beat("m1", -1, now_ms=0)
    change = g.take(g.manager.delete_group("g"))
    assert change.delete == {A: (0, 1), B: (0,)}
    assert not g.reloaded().has_group("g")
