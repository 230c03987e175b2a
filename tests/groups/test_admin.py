"""Acceptance (issue 3) item 5: kafka-python's and confluent-kafka's admins manage groups as on Kafka."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import GroupSubscribedToTopicError, NoError
from kafka.structs import OffsetAndMetadata

from tests.support.group_clients import ClientKind, Group, create_and_fill, wait_until

pytestmark = pytest.mark.clients

PER_PARTITION = 50
MEMBER = ClientKind("confluent", "confluent", "range")


@pytest.fixture
def stable_group(group: Group) -> Group:
    """Two members that consumed and committed every message of a filled 10-partition topic, still Stable."""
    expected = create_and_fill(group.server, group.topic, group.partitions, PER_PARTITION)
    group.start_many([MEMBER, MEMBER])
    group.wait_balanced()
    group.wait_consumed(expected)
    wait_until(
        lambda: (
            sum(len(d.committed) for d in group.drivers) == group.partitions
            and all(o == PER_PARTITION for d in group.drivers for o in d.committed.values())
        ),
        15.0,
        "every partition committed at its end",
    )
    return group


@pytest.fixture
def kafka_python_admin(group: Group) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=group.server.bootstrap, client_id="kp3-admin")
    try:
        yield admin
    finally:
        admin.close()


def test_kafka_python_admin_manages_groups(stable_group: Group, kafka_python_admin: KafkaAdminClient) -> None:
    """KafkaAdminClient lists, describes, reads, alters, deletes offsets of and deletes groups like Kafka."""
    group, admin = stable_group, kafka_python_admin
    listed = {g["group_id"]: g for g in admin.list_groups()}
    assert listed[group.group]["group_state"] == "Stable"
    assert listed[group.group]["protocol_type"] == "consumer"

    described = admin.describe_groups([group.group])[group.group]
    assert described["group_state"] == "Stable"
    assert described["protocol_data"] == "range"
    assert sorted(m["client_id"] for m in described["members"]) == sorted(d.name for d in group.drivers)
    owned = sorted(
        p
        for m in described["members"]
        for a in m["member_assignment"]["assigned_partitions"]
        for p in a["partitions"]
    )
    assert owned == list(range(group.partitions))

    partition = [TopicPartition(group.topic, p) for p in range(group.partitions)]
    offsets = admin.list_group_offsets({group.group: None})[group.group]
    assert {tp.partition: om.offset for tp, om in offsets.items()} == dict.fromkeys(range(10), PER_PARTITION)

    assert admin.delete_groups([group.group]) == {group.group: "NonEmptyGroupError"}
    assert admin.delete_groups(["no-such-group"]) == {"no-such-group": "GroupIdNotFoundError"}
    assert admin.delete_group_offsets(group.group, [partition[1]]) == {
        partition[1]: GroupSubscribedToTopicError
    }

    for driver in group.drivers:
        driver.close()
    assert admin.describe_groups([group.group])[group.group]["group_state"] == "Empty"
    assert admin.alter_group_offsets(group.group, {partition[0]: OffsetAndMetadata(10, "", -1)}) == {
        partition[0]: NoError
    }
    assert admin.delete_group_offsets(group.group, [partition[1]]) == {partition[1]: NoError}
    offsets = admin.list_group_offsets({group.group: None})[group.group]
    expected = {**dict.fromkeys(range(2, 10), PER_PARTITION), 0: 10}
    assert {tp.partition: om.offset for tp, om in offsets.items()} == expected

    assert admin.delete_groups([group.group]) == {group.group: "OK"}
    assert group.group not in {g["group_id"] for g in admin.list_groups()}
    assert admin.list_group_offsets({group.group: None})[group.group] == {}


def confluent_error(future: object) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result()  # type: ignore[attr-defined]
    return int(raised.value.args[0].code())


def test_confluent_admin_manages_groups(stable_group: Group) -> None:
    """confluent-kafka's AdminClient lists, describes, reads and alters offsets of, and deletes groups."""
    group = stable_group
    admin = AdminClient({"bootstrap.servers": group.server.bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=10).result().valid}
    assert listed[group.group].state == ConsumerGroupState.STABLE
    assert not listed[group.group].is_simple_consumer_group

    described = admin.describe_consumer_groups([group.group])[group.group].result()
    assert described.state == ConsumerGroupState.STABLE
    assert described.partition_assignor == "range"
    assert sorted(m.client_id for m in described.members) == sorted(d.name for d in group.drivers)
    owned = sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions)
    assert owned == list(range(group.partitions))

    def committed() -> dict[int, int]:
        request = [ConsumerGroupTopicPartitions(group.group)]
        answer = admin.list_consumer_group_offsets(request)[group.group].result()
        return {tp.partition: tp.offset for tp in answer.topic_partitions}

    assert committed() == dict.fromkeys(range(10), PER_PARTITION)
    assert (
        confluent_error(admin.delete_consumer_groups([group.group])[group.group])
        == KafkaError.NON_EMPTY_GROUP
    )
    unknown = admin.delete_consumer_groups(["no-such-group"])["no-such-group"]
    assert confluent_error(unknown) == KafkaError.GROUP_ID_NOT_FOUND

    for driver in group.drivers:
        driver.close()
    described = admin.describe_consumer_groups([group.group])[group.group].result()
    assert described.state == ConsumerGroupState.EMPTY
    assert not described.members
    change = [ConsumerGroupTopicPartitions(group.group, [ConfluentPartition(group.topic, 2, 20)])]
    altered = admin.alter_consumer_group_offsets(change)[group.group].result()
    assert [(tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions] == [(2, 20, None)]
    assert committed() == {**dict.fromkeys(range(10), PER_PARTITION), 2: 20}

    admin.delete_consumer_groups([group.group])[group.group].result()
    assert group.group not in {
        g.group_id for g in admin.list_consumer_groups(request_timeout=10).result().valid
    }
