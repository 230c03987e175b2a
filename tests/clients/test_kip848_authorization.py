"""KIP-848 consumers under the authorizer, with confluent-kafka over SASL_SSL (SCRAM-SHA-512).

``alice`` may READ group ``g848`` and READ topic ``open-848`` (READ implies DESCRIBE); no ACL names
``secret-848``. ``bob`` is a super user: it makes the topics and ACLs with AdminClient and checks
from the server's side what alice's consumers were given.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from tests.support.secure_server import USERS, SecureKcoord

pytestmark = pytest.mark.clients

GROUP = "g848"
OPEN, SECRET = "open-848", "secret-848"
TIMEOUT_S = 30.0


def _scram(server: SecureKcoord, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": server.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": USERS[user],
        "ssl.ca.location": str(server.pki.ca_cert),
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKcoord]:
    server = SecureKcoord(tmp_path_factory.mktemp("kip848-acl"))
    server.settings.update(
        {
            "authorizer.class.name": "kcoord.security.StandardAuthorizer",
            "super.users": "User:bob",
            "auto.create.topics.enable": "false",
        }
    )
    server.start()
    try:
        admin = AdminClient(_scram(server, "bob"))
        for future in admin.create_topics([NewTopic(OPEN, 2, 1), NewTopic(SECRET, 2, 1)]).values():
            future.result(TIMEOUT_S)
        literal, allow = ResourcePatternType.LITERAL, AclPermissionType.ALLOW
        grants = [
            AclBinding(ResourceType.GROUP, GROUP, literal, "User:alice", "*", AclOperation.READ, allow),
            AclBinding(ResourceType.TOPIC, OPEN, literal, "User:alice", "*", AclOperation.READ, allow),
        ]
        for future in admin.create_acls(grants, request_timeout=TIMEOUT_S).values():
            future.result(TIMEOUT_S)
        producer = Producer(_scram(server, "bob"))
        for topic in (OPEN, SECRET):
            for partition in (0, 1):
                producer.produce(topic, b"x", partition=partition)
        assert producer.flush(TIMEOUT_S) == 0
        yield server
    finally:
        server.terminate()


def _alice(server: SecureKcoord) -> Consumer:
    return Consumer(
        {
            **_scram(server, "alice"),
            "group.id": GROUP,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def _member_topics(server: SecureKcoord) -> list[set[str]]:
    """Per member of the group, as bob's AdminClient describes it: the topics it is assigned."""
    admin = AdminClient(_scram(server, "bob"))
    (future,) = admin.describe_consumer_groups([GROUP], request_timeout=TIMEOUT_S).values()
    group = future.result(TIMEOUT_S)
    return [{tp.topic for tp in m.assignment.topic_partitions} for m in group.members]


def test_a_subscription_to_a_hidden_topic_is_refused(secured: SecureKcoord) -> None:
    """alice's KIP-848 consumer subscribing to ``secret-848`` gets TOPIC_AUTHORIZATION_FAILED and
    never becomes a member; the server refused its heartbeats with that code."""
    consumer = _alice(secured)
    try:
        consumer.subscribe([SECRET])
        errors: set[int] = set()
        deadline = time.monotonic() + TIMEOUT_S
        while KafkaError.TOPIC_AUTHORIZATION_FAILED not in errors and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            assert message is None or message.error() is not None, "a record of the hidden topic arrived"
            if message is not None:
                errors.add(message.error().code())
        assert KafkaError.TOPIC_AUTHORIZATION_FAILED in errors
        assert consumer.assignment() == []
        refusals = [
            e
            for e in secured.events("request.answered_with_errors")
            if e.get("api") == "ConsumerGroupHeartbeat"
            and ErrorCode.topic_authorization_failed.name in e.get("errors", ())
        ]
        assert refusals, "the coordinator never refused a heartbeat naming the hidden topic"
    finally:
        consumer.close()


def test_a_regex_is_assigned_only_the_visible_topic(secured: SecureKcoord) -> None:
    """A regex matching both topics gets alice only ``open-848``'s partitions and records."""
    consumer = _alice(secured)
    try:
        consumer.subscribe([f"^({OPEN}|{SECRET})$"])
        seen: set[tuple[str, int]] = set()
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.add((str(message.topic()), int(message.partition())))
        assert seen == {(OPEN, 0), (OPEN, 1)}
        assert {tp.topic for tp in consumer.assignment()} == {OPEN}
        assert _member_topics(secured) == [{OPEN}]
    finally:
        consumer.close()
