"""Two nodes' security state over one real PostgreSQL, without the servers: the files adopted once,
a change through one node applied by the other's poll, and a node that cannot poll refusing once
its copy is older than the staleness bound."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from structlog.testing import capture_logs

from kcoord.cluster.shared_state import SharedStatePoller, adopt_files
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.group_config_store import GroupConfigStore, group_configs_file
from kcoord.security.acl import AclBinding, AclOperation, AclPermission, PatternType, ResourceType
from kcoord.security.acl_store import AclStore, acl_file, to_json
from kcoord.security.authorizer import AclAuthorizer
from kcoord.security.credentials import CredentialFile, CredentialStore, credentials_file
from kcoord.security.principal import KafkaPrincipal
from kcoord.security.scram import ScramCredential, ScramMechanism
from kcoord.storage.documents import Freshness
from kcoord.storage.postgres.schema import migrate
from kcoord.storage.postgres.shared_documents import SHARED_KINDS, SharedDocument
from tests.support.postgres import PostgresCluster

MAX_STALENESS_S = 5.0
HEARTBEAT, SESSION = "consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"
SHA512 = ScramMechanism.SCRAM_SHA_512
DENY_ALL_ON_G = AclBinding(
    ResourceType.GROUP, "g", PatternType.LITERAL, "User:*", "*", AclOperation.ALL, AclPermission.DENY
)
ALICE = KafkaPrincipal.user("alice")


def _credential(password: str) -> ScramCredential:
    return ScramCredential.from_password(SHA512, password, 4096)


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Node:
    """One node's shared documents, the stores over them, and its poller (with a manual clock)."""

    pool: asyncpg.Pool
    data_dir: Path
    clock: ManualClock
    freshness: Freshness
    documents: list[SharedDocument]
    authorizer: AclAuthorizer
    credentials: CredentialStore
    group_configs: GroupConfigStore
    poller: SharedStatePoller

    @classmethod
    async def start(cls, url: str, data_dir: Path) -> Node:
        pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
        async with pool.acquire() as connection:
            await migrate(connection)
        clock = ManualClock()
        freshness = Freshness(MAX_STALENESS_S, clock)
        documents = [SharedDocument(lambda: pool, kind) for kind in SHARED_KINDS]
        files = acl_file(data_dir), credentials_file(data_dir), group_configs_file(data_dir)
        await adopt_files(list(zip(files, documents, strict=True)))
        authorizer = AclAuthorizer(
            AclStore(documents[0]), super_users=["User:admin"], allow_if_no_acl=True, freshness=freshness
        )
        credentials = CredentialStore(documents[1], reread_on_login=False, freshness=freshness)
        group_configs = GroupConfigStore(documents[2])
        await authorizer.load()
        await credentials.load()
        await group_configs.load()
        freshness.succeeded()
        refreshes = [authorizer.refresh, credentials.refresh, group_configs.refresh]
        poller = SharedStatePoller(refreshes, freshness, interval_s=1.0)
        return cls(
            pool, data_dir, clock, freshness, documents, authorizer, credentials, group_configs, poller
        )

    async def close(self) -> None:
        self.credentials.close()
        await self.pool.close()


@pytest.fixture
async def database(postgres_cluster: PostgresCluster) -> AsyncIterator[str]:
    yield postgres_cluster.create_database()


async def _node(url: str, data_dir: Path) -> Node:
    return await Node.start(url, data_dir)


def _files_with_state(data_dir: Path, user: str, group_timeout: int) -> None:
    """A single node's data directory as it was before the cluster: one ACL, one user, one group config."""
    data_dir.mkdir()
    acl_file(data_dir).write({"version": 1, "acls": [to_json(DENY_ALL_ON_G)]})
    CredentialFile(data_dir).write({user: {SHA512: ScramCredential.from_password(SHA512, "pw", 4096)}})
    group_configs_file(data_dir).write(
        {"version": 1, "groups": {"g": {"consumer.session.timeout.ms": group_timeout}}}
    )


async def test_the_first_node_files_are_adopted_once_and_later_files_are_ignored(
    database: str, tmp_path: Path
) -> None:
    """The first cluster node's files become the cluster's state; a second node's differing files
    change nothing and are named in a warning."""
    _files_with_state(tmp_path / "n1", "alice", 45000)
    _files_with_state(tmp_path / "n2", "bob", 50000)
    with capture_logs() as logs:
        first = await _node(database, tmp_path / "n1")
        second = await _node(database, tmp_path / "n2")
    try:
        for node in (first, second):
            assert node.authorizer.bindings == (DENY_ALL_ON_G,)
            assert node.credentials.users() == ["alice"]
            assert dict(node.group_configs.overrides.of("g")) == {"consumer.session.timeout.ms": 45000}
        adopted = [e["kind"] for e in logs if e["event"] == "shared_state.adopted"]
        ignored = [(e["kind"], e["file"]) for e in logs if e["event"] == "shared_state.file_not_adopted"]
        assert sorted(adopted) == sorted(SHARED_KINDS)
        assert sorted(kind for kind, _ in ignored) == sorted(SHARED_KINDS)
        assert all(file.startswith(str(tmp_path / "n2")) for _, file in ignored)
    finally:
        await first.close()
        await second.close()


async def test_a_change_through_one_node_applies_on_the_other_at_its_next_poll(
    database: str, tmp_path: Path
) -> None:
    """An ACL, a user deletion and a group config committed through node 1 are in effect on node 2
    after one poll, and not before."""
    one, two = await _node(database, tmp_path / "n1"), await _node(database, tmp_path / "n2")
    try:
        await one.credentials.apply(
            [("alice", SHA512, ScramCredential.from_password(SHA512, "pw", 4096))], []
        )
        await two.poller.poll()
        assert two.credentials.lookup("alice", SHA512) is not None

        await one.authorizer.create([DENY_ALL_ON_G])
        await one.credentials.apply([], [("alice", SHA512)])
        await one.group_configs.alter("g", lambda current: {**current, HEARTBEAT: 2000})
        assert two.authorizer.authorize(ALICE, "h", AclOperation.READ, ResourceType.GROUP, "g")
        assert await two.poller.poll()
        assert not two.authorizer.authorize(ALICE, "h", AclOperation.READ, ResourceType.GROUP, "g")
        assert two.credentials.lookup("alice", SHA512) is None
        assert two.group_configs.overrides.heartbeat_interval_ms("g", 5000) == 2000
    finally:
        await one.close()
        await two.close()


async def test_changes_through_two_nodes_at_once_both_land(database: str, tmp_path: Path) -> None:
    """Two nodes changing ACLs or one group's configs from stale copies both keep theirs: a change
    applies to the state as stored."""
    one, two = await _node(database, tmp_path / "n1"), await _node(database, tmp_path / "n2")
    other = AclBinding(
        ResourceType.TOPIC, "t", PatternType.LITERAL, "User:bob", "*", AclOperation.READ, AclPermission.ALLOW
    )
    try:
        await one.authorizer.create([DENY_ALL_ON_G])
        await two.authorizer.create([other])
        assert set(two.authorizer.bindings) == {DENY_ALL_ON_G, other}
        await one.poller.poll()
        assert set(one.authorizer.bindings) == {DENY_ALL_ON_G, other}
        await one.group_configs.alter("g", lambda current: {**current, HEARTBEAT: 2000})
        assert await two.group_configs.alter("g", lambda current: {**current, SESSION: 9000}) == {
            HEARTBEAT: 2000,
            SESSION: 9000,
        }
    finally:
        await one.close()
        await two.close()


async def test_a_node_that_cannot_poll_refuses_once_its_copy_is_older_than_the_bound(
    database: str, tmp_path: Path
) -> None:
    """Within the bound a node that lost its database still decides; past it, ACL decisions raise
    REQUEST_TIMED_OUT (super users excepted) and logins fail, and one good poll restores both."""
    node = await _node(database, tmp_path / "n1")
    await node.credentials.apply([("alice", SHA512, _credential("pw"))], [])
    healthy_pool = node.pool
    broken_pool = await asyncpg.create_pool(database, min_size=1, max_size=1)
    await broken_pool.close()
    for document in node.documents:
        document._pool_of = lambda: broken_pool
    try:
        with capture_logs() as logs:
            assert not await node.poller.poll()
            node.clock.now += MAX_STALENESS_S - 0.5
            assert node.authorizer.authorize(ALICE, "h", AclOperation.READ, ResourceType.GROUP, "g")
            assert await node.credentials.password_matches("alice", "pw")
            node.clock.now += 1.0
            assert not await node.poller.poll()
            with pytest.raises(KafkaError) as refused:
                node.authorizer.authorize(ALICE, "h", AclOperation.READ, ResourceType.GROUP, "g")
            assert refused.value.code == ErrorCode.request_timed_out
            with pytest.raises(KafkaError):
                node.authorizer.decision_key(ALICE, "h")
            admin = KafkaPrincipal.user("admin")
            assert node.authorizer.authorize(
                admin, "h", AclOperation.ALL, ResourceType.CLUSTER, "kafka-cluster"
            )
            assert not await node.credentials.password_matches("alice", "pw")
        events = [e["event"] for e in logs]
        assert events.count("shared_state.poll_failed") == 1, "one line per outage, not per poll"
        assert events.count("shared_state.stale") == 1
        assert "scram_credentials.stale" in events
        for document in node.documents:
            document._pool_of = lambda: healthy_pool
        assert await node.poller.poll()
        assert node.authorizer.authorize(ALICE, "h", AclOperation.READ, ResourceType.GROUP, "g")
        assert await node.credentials.password_matches("alice", "pw")
    finally:
        await node.close()
