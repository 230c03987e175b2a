"""Issue 15, item 1: one security state for the whole cluster. Three nodes over one real PostgreSQL,
SASL_PLAINTEXT only, the authorizer on, managed with confluent-kafka's AdminClient as a super user:

- an ACL created through one node is enforced by the other two;
- a SCRAM user deleted through one node can no longer log in on the other two;
- a group config altered through one node applies on the other nodes that coordinate a group;

each measured from the acknowledgement to the first answer that shows the effect (printed), and all
of it still true after every node was stopped and started again. The AdminClients are bootstrapped
on node 1 (node 2 for the deletion), but librdkafka sends CreateAcls, AlterUserScramCredentials and
IncrementalAlterConfigs on groups to any broker it knows: the node that answered is read from the
logs, and the figures name it.

The bound: a change is committed in the database before it is acknowledged, and every node polls
the shared documents every ``kcoord.node.lease.renew.ms`` (1 s here, the default), so it applies
everywhere within one poll interval plus a round trip. :data:`BOUND_S` allows 2 s more for a loaded
machine.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.security import scram
from kcoord.security.scram_decoy import DECOY_KEY_FILE
from tests.support.cluster_nodes import wait_converged, wait_until
from tests.support.postgres import PostgresCluster
from tests.support.raw_client import RawClient
from tests.support.scram_client import ScramClient
from tests.support.secure_cluster import (
    ADMIN,
    ADMIN_PASSWORD,
    SaslClusterNode,
    add_cluster_user,
    admin_client,
    coordinator_of,
    heartbeat_interval_ms,
    logged_in,
    scram_login,
    topic_error,
)

pytestmark = pytest.mark.clients

POLL_S = 1.0
"""``kcoord.node.lease.renew.ms`` (the default): how often every node polls the shared state."""
BOUND_S = POLL_S + 2.0
"""The stated bound (one poll interval plus a round trip) with slack for a loaded machine."""
TIMEOUT_S = 30.0
TOPIC = "sec-orders"
HEARTBEAT = "consumer.heartbeat.interval.ms"
TUNED_HEARTBEAT_MS = 1234
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture
def raw_clients() -> Iterator[list[RawClient]]:
    opened: list[RawClient] = []
    try:
        yield opened
    finally:
        for client in opened:
            client.close()


def _adopted_acls(data_dir: Path) -> None:
    """A single node's ``acls.json``, from before the cluster: alice may do anything on ``sec-`` topics."""
    data_dir.mkdir(parents=True)
    acl = {
        "resource_type": "TOPIC",
        "resource_name": "sec-",
        "pattern_type": "PREFIXED",
        "principal": "User:alice",
        "host": "*",
        "operation": "ALL",
        "permission": "ALLOW",
    }
    (data_dir / "acls.json").write_text(json.dumps({"version": 1, "acls": [acl]}))


def _until(condition: Callable[[], bool], what: str) -> float:
    """Seconds from now until ``condition`` holds (checked every 20 ms), failing after TIMEOUT_S."""
    started = time.monotonic()
    while time.monotonic() - started < TIMEOUT_S:
        if condition():
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError(f"not within {TIMEOUT_S}s: {what}")


def _each_until(
    nodes: list[SaslClusterNode], condition: Callable[[SaslClusterNode], bool]
) -> dict[int, float]:
    """Seconds from now until ``condition`` first held on each node, all watched together."""
    started, seen = time.monotonic(), dict[int, float]()
    while len(seen) < len(nodes) and time.monotonic() - started < TIMEOUT_S:
        for node in nodes:
            if node.node_id not in seen and condition(node):
                seen[node.node_id] = time.monotonic() - started
        time.sleep(0.02)
    assert len(seen) == len(nodes), f"only nodes {sorted(seen)} within {TIMEOUT_S}s"
    return seen


def _answered_by(
    nodes: list[SaslClusterNode], event: str, matches: Callable[[dict[str, Any]], bool]
) -> SaslClusterNode:
    """The one node whose log shows it made the change (librdkafka sends some admin requests to
    any broker it knows, not only to its bootstrap: the figures name the node that answered). The
    line is logged before the answer but read from the node's stderr by a thread, so it is waited for."""
    found: list[SaslClusterNode] = []

    def logged() -> bool:
        found[:] = [node for node in nodes if any(matches(e) for e in node.events(event))]
        return bool(found)

    wait_until(logged, 10, f"a node logging {event}")
    (node,) = found
    return node


def _upsert_users(node: SaslClusterNode) -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    changes = [UserScramCredentialUpsertion(u, info, p.encode()) for u, p in USERS.items()]
    admin = admin_client(node)
    for future in admin.alter_user_scram_credentials(changes).values():
        future.result(TIMEOUT_S)


def _alter_heartbeat(node: SaslClusterNode, groups: list[str], value: int) -> None:
    """One IncrementalAlterConfigs setting the groups' heartbeat interval."""
    entry = ConfigEntry(HEARTBEAT, str(value), incremental_operation=AlterConfigOpType.SET)
    resources = [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry]) for group in groups]
    admin = admin_client(node)
    for future in admin.incremental_alter_configs(resources).values():
        future.result(TIMEOUT_S)


def _one_group_per_coordinator(client: RawClient, nodes: int) -> dict[int, str]:
    """Node id -> a group that node coordinates now, for every node."""
    found: dict[int, str] = {}
    for group in (f"sec-group-{i}" for i in range(500)):
        found.setdefault(coordinator_of(client, group), group)
        if len(found) == nodes:
            return found
    raise AssertionError(f"500 group names reach only coordinators {sorted(found)}")


def _login_code(node: SaslClusterNode, user: str) -> ErrorCode:
    code, client = scram_login(node, user, USERS[user])
    if client is not None:
        client.close()
    return code


@pytest.mark.slow
def test_acls_users_and_group_configs_are_the_clusters_and_survive_a_full_restart(
    tmp_path: Path, postgres_cluster: PostgresCluster, raw_clients: list[RawClient]
) -> None:
    """A change through one node is enforced by the others within BOUND_S of its acknowledgement
    (ACL: node 1 to nodes 2 and 3; user deletion: node 2 to node 3; group config: a non-coordinator
    to the coordinator), node 1's old acls.json is adopted, and all of it holds after every node restarts."""
    database = postgres_cluster.create_database()
    add_cluster_user(database, ADMIN, ADMIN_PASSWORD)
    _adopted_acls(tmp_path / "node1")
    nodes = [SaslClusterNode(tmp_path / f"node{n}", database, n) for n in (1, 2, 3)]
    figures: dict[str, float] = {}
    try:
        for node in nodes:
            node.start()
        one, two, three = nodes
        wait_converged(nodes, postgres_cluster, database)
        assert one.events("shared_state.adopted"), "node 1's acls.json became the cluster's ACLs"

        # 0. Users created through node 1 can log in on nodes 2 and 3; the topic exists everywhere.
        _upsert_users(one)
        for node_id, seconds in _each_until([two, three], lambda n: _login_code(n, "alice") == 0).items():
            figures[f"user created via node 1, can log in on node {node_id}"] = seconds
        admin_one = admin_client(one)
        (created,) = admin_one.create_topics([NewTopic(TOPIC, 1)]).values()
        created.result(TIMEOUT_S)
        alice = {node.node_id: logged_in(node, "alice", USERS["alice"]) for node in nodes}
        raw_clients.extend(alice.values())
        _each_until(nodes, lambda n: topic_error(alice[n.node_id], TOPIC) == ErrorCode.none)

        # 1. A DENY created through one node (bootstrapped on node 1) is enforced by the other two.
        deny = AclBinding(
            ResourceType.TOPIC,
            TOPIC,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.DENY,
        )
        for future in admin_one.create_acls([deny]).values():
            future.result(TIMEOUT_S)
        through = _answered_by(nodes, "acls.created", lambda event: True)
        others = [node for node in nodes if node is not through]
        refused = ErrorCode.topic_authorization_failed
        denied = _each_until(others, lambda n: topic_error(alice[n.node_id], TOPIC) == refused)
        for node_id, seconds in denied.items():
            figures[f"ACL created via node {through.node_id}, enforced by node {node_id}"] = seconds

        # 2. A user deleted through one node (bootstrapped on node 2) can no longer log in on the others.
        assert all(_login_code(node, "bob") == ErrorCode.none for node in nodes)
        deletion = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)
        admin_two = admin_client(two)
        (deleted,) = admin_two.alter_user_scram_credentials([deletion]).values()
        deleted.result(TIMEOUT_S)
        through = _answered_by(nodes, "scram_credentials.altered", lambda event: event["deleted"] == ["bob"])
        others = [node for node in nodes if node is not through]
        failed = ErrorCode.sasl_authentication_failed
        for node_id, seconds in _each_until(others, lambda n: _login_code(n, "bob") == failed).items():
            figures[f"user deleted via node {through.node_id}, refused by node {node_id}"] = seconds

        # 3. Group configs altered through one node apply on the nodes that coordinate the groups:
        # one group per coordinator, altered in one request, so whichever node librdkafka sends it
        # to, two of the groups are coordinated elsewhere.
        admin_raw = logged_in(one, ADMIN, ADMIN_PASSWORD)
        raw_clients.append(admin_raw)
        groups = _one_group_per_coordinator(admin_raw, len(nodes))
        as_admin = {node.node_id: logged_in(node, ADMIN, ADMIN_PASSWORD) for node in nodes}
        raw_clients.extend(as_admin.values())

        def tuned(node: SaslClusterNode) -> bool:
            interval = heartbeat_interval_ms(as_admin[node.node_id], groups[node.node_id])
            return interval == TUNED_HEARTBEAT_MS

        assert not any(tuned(node) for node in nodes)
        _alter_heartbeat(one, list(groups.values()), TUNED_HEARTBEAT_MS)
        through = _answered_by(
            nodes, "group.configs.altered", lambda event: event["group"] in groups.values()
        )
        others = [node for node in nodes if node is not through]
        for node_id, seconds in _each_until(others, tuned).items():
            figures[
                f"group config altered via node {through.node_id}, applied by coordinator node {node_id}"
            ] = seconds

        for what, seconds in figures.items():
            print(f"propagation: {what}: {seconds * 1000:.0f} ms (bound {BOUND_S:.1f} s)")
        assert max(figures.values()) <= BOUND_S, figures

        # 4. Every node stopped, then started again: the cluster's state is the database's.
        for client in raw_clients:
            client.close()
        raw_clients.clear()
        for node in nodes:
            assert node.terminate() == 0
        for node in nodes:
            node.start()
        wait_converged(nodes, postgres_cluster, database)
        for node in nodes:
            client = logged_in(node, "alice", USERS["alice"])
            raw_clients.append(client)
            assert topic_error(client, TOPIC) == ErrorCode.topic_authorization_failed
            assert _login_code(node, "bob") == ErrorCode.sasl_authentication_failed
        as_admin = {node.node_id: logged_in(node, ADMIN, ADMIN_PASSWORD) for node in nodes}
        raw_clients.extend(as_admin.values())
        admin_raw = as_admin[1]
        coordinated = {coordinator_of(admin_raw, group): group for group in groups.values()}
        assert sorted(coordinated) == [1, 2, 3], "each group is coordinated by one of the nodes"

        def tuned_after_restart(node: SaslClusterNode) -> bool:
            interval = heartbeat_interval_ms(as_admin[node.node_id], coordinated[node.node_id])
            return interval == TUNED_HEARTBEAT_MS

        _each_until(nodes, tuned_after_restart)
        assert [line for node in nodes for line in node.error_lines()] == []
    finally:
        for node in nodes:
            node.kill()


def _decoy_salt(node: SaslClusterNode, user: str) -> bytes:
    """The salt ``node`` shows an unknown ``user`` in its SCRAM-SHA-512 server-first message."""
    with RawClient(node.host, node.port) as client:
        handshake = client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
        assert handshake.error_code == ErrorCode.none, handshake
        first = client.call(
            ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": ScramClient("sha512", user, "x").first()}
        )
        assert first.error_code == ErrorCode.none, first
    attributes = dict(part.split("=", 1) for part in bytes(first.auth_bytes).decode().split(","))
    return base64.b64decode(attributes["s"])


def test_an_unknown_user_shows_one_salt_on_every_node(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """The SCRAM decoy key is the cluster's: an unknown name gets the same salt from every node (a
    per-node key would show two salts where a real user shows one), node 1's key from before the
    cluster is the one kept, and a node with a fresh data directory shows it too after a restart."""
    database = postgres_cluster.create_database()
    add_cluster_user(database, ADMIN, ADMIN_PASSWORD)
    (tmp_path / "node1").mkdir()
    single_node_key = bytes(range(32))
    (tmp_path / "node1" / DECOY_KEY_FILE).write_bytes(single_node_key)
    expected = scram.ScramDecoy(single_node_key).parameters("mallory", scram.ScramMechanism.SCRAM_SHA_512)[0]
    nodes = [SaslClusterNode(tmp_path / f"node{n}", database, n) for n in (1, 2)]
    try:
        for node in nodes:
            node.start()
        wait_converged(nodes, postgres_cluster, database)
        one, two = nodes
        assert _decoy_salt(one, "mallory") == expected, "node 1's key from before the cluster is kept"
        assert _decoy_salt(two, "mallory") == expected, "node 2 shows the cluster's salt"
        assert _decoy_salt(two, "trent") == _decoy_salt(one, "trent") != expected
        assert not (tmp_path / "node2" / DECOY_KEY_FILE).exists(), "no private key on node 2"
        two.restart()
        assert _decoy_salt(two, "mallory") == expected, "the key outlives a restart"
        for node in nodes:
            assert not node.error_lines(), node.error_lines()
    finally:
        for node in nodes:
            node.kill()
