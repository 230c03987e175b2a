"""Acceptance for SASL_SSL and mTLS with every real client: produce, consume in a group, commit.

Over SASL_SSL with SCRAM-SHA-512: kafka-python, confluent-kafka, aiokafka, kcat and kafkajs each
produce, consume in a group and commit; a wrong password fails on the client with an
authentication error and is logged; a plaintext client on the SASL_SSL port is refused. PLAIN over
SASL_SSL and mTLS (SSL listener, client certificate required) work with confluent-kafka.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.secure_server import USERS, SecureKcoord

pytestmark = pytest.mark.clients

MESSAGES = 50
NODE_DIR = Path(__file__).parent / "node"
KCAT = shutil.which("kcat") or "/usr/bin/kcat"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKcoord]:
    server = SecureKcoord(tmp_path_factory.mktemp("secure")).start()
    try:
        yield server
    finally:
        server.terminate()


def _names(client: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"sasl-{client}-{suffix}", f"sasl-group-{client}-{suffix}"


def _scram(server: SecureKcoord, user: str = "alice", password: str | None = None) -> dict[str, Any]:
    return {
        "bootstrap.servers": server.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": USERS[user] if password is None else password,
        "ssl.ca.location": str(server.pki.ca_cert),
    }


def _confluent_round_trip(config: dict[str, Any], topic: str, group: str) -> None:
    """Produce MESSAGES, consume them in a group, commit, and read the commit back."""
    producer = Producer(config)
    for i in range(MESSAGES):
        producer.produce(topic, key=str(i).encode(), value=f"value-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < MESSAGES and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
        assert values == [f"value-{i}".encode() for i in range(MESSAGES)]
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == MESSAGES
    finally:
        consumer.close()


def test_confluent_kafka_scram_sha_512(secure: SecureKcoord) -> None:
    """librdkafka over SASL_SSL with SCRAM-SHA-512 produces, consumes in a group and commits."""
    topic, group = _names("confluent")
    _confluent_round_trip(_scram(secure), topic, group)


def test_confluent_kafka_plain(secure: SecureKcoord) -> None:
    """librdkafka over SASL_SSL with PLAIN, the password checked against the stored SCRAM keys."""
    topic, group = _names("confluent-plain")
    _confluent_round_trip({**_scram(secure, "bob"), "sasl.mechanism": "PLAIN"}, topic, group)


def test_confluent_kafka_mtls(secure: SecureKcoord) -> None:
    """librdkafka with a client certificate on the SSL listener (client auth required) round-trips."""
    topic, group = _names("confluent-mtls")
    config = {
        "bootstrap.servers": secure.address("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.pki.ca_cert),
        "ssl.certificate.location": str(secure.pki.client_cert),
        "ssl.key.location": str(secure.pki.client_key),
    }
    _confluent_round_trip(config, topic, group)


def test_mtls_without_a_certificate_is_refused(secure: SecureKcoord) -> None:
    """With ssl.client.auth=required a client without a certificate gets no metadata."""
    admin = AdminClient(
        {
            "bootstrap.servers": secure.address("SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(secure.pki.ca_cert),
        }
    )
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


def test_wrong_password_fails_with_an_authentication_error(secure: SecureKcoord) -> None:
    """A wrong SCRAM password is an authentication error on the client and a log line on the server."""
    errors: list[KafkaError] = []
    admin = AdminClient({**_scram(secure, password="wrong"), "error_cb": errors.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    admin.poll(1)  # delivers the errors to error_cb
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    failure = secure.wait_for_event("sasl.authentication_failed")
    assert failure["user"] == "alice" and failure["mechanism"] == "SCRAM-SHA-512"


def test_plaintext_client_on_the_sasl_ssl_port_is_refused(secure: SecureKcoord) -> None:
    """An ApiVersions request in clear text on the SASL_SSL port is never answered; the server closes."""
    host, _, port = secure.bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        body = b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04test"
        sock.sendall(len(body).to_bytes(4, "big") + body)
        try:
            answer = sock.recv(4096)
        except ConnectionResetError:
            answer = b""
    assert answer == b"" or answer[:1] == b"\x15", answer  # closed, or a TLS alert record
    admin = AdminClient({"bootstrap.servers": secure.bootstrap, "security.protocol": "PLAINTEXT"})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_kafka_python_scram_sha_512(secure: SecureKcoord) -> None:
    """kafka-python over SASL_SSL with SCRAM-SHA-512 produces, consumes in a group and commits."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition as KpPartition

    from tests.support.kafka_python import subscribe_when_known

    topic, group = _names("kafka-python")
    common = {
        "bootstrap_servers": secure.bootstrap,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": USERS["alice"],
        "ssl_cafile": str(secure.pki.ca_cert),
    }
    producer = KafkaProducer(**common)
    for i in range(MESSAGES):
        producer.send(topic, key=str(i).encode(), value=f"value-{i}".encode(), partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        **common,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=30000,
    )
    try:
        subscribe_when_known(consumer, topic)
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == MESSAGES:
                break
        assert values == [f"value-{i}".encode() for i in range(MESSAGES)]
        consumer.commit()
        assert consumer.committed(KpPartition(topic, 0)) == MESSAGES
    finally:
        consumer.close()


def test_aiokafka_scram_sha_512(secure: SecureKcoord) -> None:
    """aiokafka over SASL_SSL with SCRAM-SHA-512 produces, consumes in a group and commits."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioPartition
    from aiokafka.helpers import create_ssl_context

    topic, group = _names("aiokafka")

    async def scenario() -> None:
        common: dict[str, Any] = {
            "bootstrap_servers": secure.bootstrap,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice",
            "sasl_plain_password": USERS["alice"],
            "ssl_context": create_ssl_context(cafile=str(secure.pki.ca_cert)),
        }
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            for i in range(MESSAGES):
                await producer.send_and_wait(topic, f"value-{i}".encode(), key=str(i).encode(), partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, **common, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await consumer.start()
        try:
            values = []
            async with asyncio.timeout(60):
                async for message in consumer:
                    values.append(message.value)
                    if len(values) == MESSAGES:
                        break
            assert values == [f"value-{i}".encode() for i in range(MESSAGES)]
            await consumer.commit()
            assert await consumer.committed(AioPartition(topic, 0)) == MESSAGES
        finally:
            await consumer.stop()

    asyncio.run(scenario())


def _committed(secure: SecureKcoord, topic: str, group: str) -> int:
    consumer = Consumer({**_scram(secure), "group.id": group})
    try:
        return int(consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        consumer.close()


def test_kcat_scram_sha_512(secure: SecureKcoord) -> None:
    """kcat over SASL_SSL with SCRAM-SHA-512 produces, consumes in a group (-G) and commits."""
    topic, group = _names("kcat")
    sasl = [
        "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=SCRAM-SHA-512",
        "-X", "sasl.username=alice", "-X", f"sasl.password={USERS['alice']}",
        "-X", f"ssl.ca.location={secure.pki.ca_cert}",
    ]  # fmt: skip
    lines = "".join(f"value-{i}\n" for i in range(MESSAGES))
    subprocess.run(
        [KCAT, "-b", secure.bootstrap, *sasl, "-P", "-t", topic, "-p", "0"],
        input=lines, text=True, check=True, timeout=60,
    )  # fmt: skip
    consumed = subprocess.run(
        [KCAT, "-b", secure.bootstrap, *sasl, "-G", group, "-c", str(MESSAGES), "-o", "beginning",
         "-X", "auto.commit.interval.ms=100", "-e", topic],
        capture_output=True, text=True, check=True, timeout=90,
    )  # fmt: skip
    assert consumed.stdout.splitlines() == [f"value-{i}" for i in range(MESSAGES)]
    assert _committed(secure, topic, group) == MESSAGES


def test_kafkajs_scram_sha_512(secure: SecureKcoord) -> None:
    """kafkajs over SASL_SSL with SCRAM-SHA-512 produces, consumes in a group and commits."""
    assert (NODE_DIR / "node_modules" / "kafkajs").exists(), "run npm install in tests/clients/node"
    topic, group = _names("kafkajs")
    config = {
        "bootstrap": secure.bootstrap,
        "topic": topic,
        "group": group,
        "messages": MESSAGES,
        "username": "alice",
        "password": USERS["alice"],
        "ca": str(secure.pki.ca_cert),
    }
    result = subprocess.run(
        ["node", "sasl_round_trip.js", json.dumps(config)],
        cwd=NODE_DIR, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["values"] == [f"value-{i}" for i in range(MESSAGES)]
    assert _committed(secure, topic, group) == MESSAGES


def test_confluent_admin_manages_scram_users(secure: SecureKcoord) -> None:
    """AdminClient.alter/describe_user_scram_credentials make a user who can then log in, and remove it."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(_scram(secure))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    for future in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("carol", info, b"carol-secret")]
    ).values():
        future.result(10)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(10)
    assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]
    carol = AdminClient({**_scram(secure), "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "carol",
                         "sasl.password": "carol-secret"})  # fmt: skip
    assert carol.list_topics(timeout=10).brokers
    for future in admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]
    ).values():
        future.result(10)
    with pytest.raises(KafkaException):
        admin.describe_user_scram_credentials(["carol"])["carol"].result(10)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kafka_python_2_uses_bare_tokens_after_a_v0_handshake(secure: SecureKcoord, mechanism: str) -> None:
    """kafka-python 2.0.2 (SaslHandshake v0, then bare tokens without headers) round-trips and commits."""
    from tests.clients.test_kafka_python2 import kp2_python

    topic, group = _names(f"kp2-{mechanism.lower()}")
    config = {
        "bootstrap": secure.bootstrap,
        "topic": topic,
        "group": group,
        "mechanism": mechanism,
        "username": "alice",
        "password": USERS["alice"],
        "cafile": str(secure.pki.ca_cert),
        "messages": MESSAGES,
    }
    result = subprocess.run(
        [kp2_python(), str(Path(__file__).with_name("kp2_sasl.py")), json.dumps(config)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"values": [f"value-{i}" for i in range(MESSAGES)], "committed": MESSAGES}
