"""Cluster nodes whose only listener is SASL_PLAINTEXT with the authorizer on, and the raw SCRAM
logins the shared-security tests make against one chosen node."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from tests.support.cluster_nodes import cluster_settings
from tests.support.raw_client import RawClient
from tests.support.scram_client import ScramClient
from tests.support.server import KcoordProcess

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
MECHANISM = "SCRAM-SHA-512"


class SaslClusterNode(KcoordProcess):
    """A cluster node listening on SASL_PLAINTEXT only (restarts keep the port)."""

    def __init__(self, data_dir: Path, database: str, node_id: int, **overrides: str) -> None:
        settings = cluster_settings(
            database,
            node_id,
            **{
                "authorizer.class.name": "kcoord.security.StandardAuthorizer",
                "super.users": f"User:{ADMIN}",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
                "connection.failed.authentication.delay.ms": "20",
                **overrides,
            },
        )
        super().__init__(data_dir, settings)

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--listen") + 1] = f"SASL_PLAINTEXT://127.0.0.1:{self.port}"
        return cmd

    @property
    def node_id(self) -> int:
        return int(self.settings["node.id"])

    def error_lines(self) -> list[dict[str, object]]:
        """The error-level lines this node logged (a test fails on any it did not expect)."""
        return [e for e in self.logs if e.get("level") in ("error", "critical", "exception")]


def add_cluster_user(database: str, name: str, password: str) -> None:
    """``kcoord users add NAME --storage DATABASE``, as an operator adds the cluster's first user."""
    subprocess.run(
        [sys.executable, "-m", "kcoord", "users", "add", name, "--password-stdin", "--storage", database],
        input=password + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )


def admin_client(node: KcoordProcess, user: str = ADMIN, password: str = ADMIN_PASSWORD) -> AdminClient:
    """confluent-kafka's AdminClient bootstrapped on ``node`` alone, logged in with SCRAM-SHA-512."""
    return AdminClient(
        {
            "bootstrap.servers": node.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": password,
            "socket.timeout.ms": 10_000,
        }
    )


def scram_login(node: KcoordProcess, user: str, password: str) -> tuple[ErrorCode, RawClient | None]:
    """A SCRAM-SHA-512 login on ``node``: NONE and the logged-in connection, or the failure's code."""
    client = RawClient(node.host, node.port)
    try:
        handshake = client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": MECHANISM})
        assert handshake.error_code == ErrorCode.none, handshake
        scram = ScramClient("sha512", user, password)
        first = client.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.first()})
        if first.error_code != ErrorCode.none:
            client.close()
            return ErrorCode(first.error_code), None
        final = client.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.final(bytes(first.auth_bytes))})
        if final.error_code != ErrorCode.none:
            client.close()
            return ErrorCode(final.error_code), None
        assert scram.verify(bytes(final.auth_bytes))
    except BaseException:
        client.close()
        raise
    return ErrorCode.none, client


def logged_in(node: KcoordProcess, user: str, password: str) -> RawClient:
    code, client = scram_login(node, user, password)
    assert code == ErrorCode.none and client is not None, f"{user} could not log in on {node.bootstrap}"
    return client


def topic_error(client: RawClient, topic: str) -> ErrorCode:
    """The error Metadata v12 gives ``topic`` on this connection's node (never auto-creating)."""
    body = {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    (entry,) = client.call(ApiKey.METADATA, 12, body).topics
    return ErrorCode(entry.error_code)


def coordinator_of(client: RawClient, group: str) -> int:
    answer = client.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    assert answer.error_code == ErrorCode.none, answer
    return int(answer.node_id)


def heartbeat_interval_ms(client: RawClient, group: str) -> int | None:
    """A KIP-848 join on this connection's node: the heartbeat interval it gives the group's new
    member, None when it does not coordinate the group now."""
    response = client.call(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        {
            "group_id": group,
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "rebalance_timeout": 30_000,
            "subscribed_topic_names": ["no-such-topic"],
            "topic_partitions": [],
        },
    )
    if response.error_code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
        return None
    assert response.error_code == ErrorCode.none, response
    return int(response.heartbeat_interval.total_seconds() * 1000)
