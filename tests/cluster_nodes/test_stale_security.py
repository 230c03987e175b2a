"""Issue 15: a cluster node that cannot read the shared security state does not decide with a stale
copy past ``kcoord.cluster.state.max.staleness.ms``. One SASL cluster node over its own real
PostgreSQL, which is stopped: until the bound the node still decides on the ACLs it has; past it an
ordinary user's request answers REQUEST_TIMED_OUT (retriable), a super user's is still answered, a
new login fails with a log line saying why; with the database back, all of it recovers by itself."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kcoord.protocol.errors import ErrorCode
from tests.support.cluster_nodes import metric_samples, wait_until
from tests.support.postgres import PostgresCluster
from tests.support.secure_cluster import (
    ADMIN,
    ADMIN_PASSWORD,
    SaslClusterNode,
    add_cluster_user,
    logged_in,
    scram_login,
    topic_error,
)

pytestmark = pytest.mark.clients

STALENESS_S = 3.0
POLL_S = 0.5
ALICE, ALICE_PASSWORD = "alice", "alice-secret"


@pytest.fixture
def own_postgres() -> Iterator[PostgresCluster]:
    """A PostgreSQL of this test's own, which it stops and starts."""
    cluster = PostgresCluster().start()
    try:
        yield cluster
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            cluster.stop_server()
        shutil.rmtree(cluster.root, ignore_errors=True)


def test_a_node_cut_off_from_the_database_refuses_past_the_staleness_bound_then_recovers(
    tmp_path: Path, own_postgres: PostgresCluster
) -> None:
    """With the database stopped, alice's Metadata is decided on the node's copy until the bound,
    then answers REQUEST_TIMED_OUT (the admin's still answers, a new login fails and is logged);
    once the database is back both are answered and logins work again."""
    database = own_postgres.create_database()
    add_cluster_user(database, ADMIN, ADMIN_PASSWORD)
    add_cluster_user(database, ALICE, ALICE_PASSWORD)
    node = SaslClusterNode(
        tmp_path / "node1",
        database,
        1,
        **{
            "kcoord.cluster.state.max.staleness.ms": str(int(STALENESS_S * 1000)),
            "kcoord.node.lease.renew.ms": str(int(POLL_S * 1000)),
            "kcoord.node.lease.ms": "2000",
        },
    )
    node.start()
    alice = logged_in(node, ALICE, ALICE_PASSWORD)
    admin = logged_in(node, ADMIN, ADMIN_PASSWORD)
    try:
        assert topic_error(alice, "sec-nowhere") == ErrorCode.topic_authorization_failed
        stopping_at = time.monotonic()
        own_postgres.stop_server()
        stopped_at = time.monotonic()
        decided = [topic_error(alice, "sec-nowhere")]
        while decided[-1] != ErrorCode.request_timed_out and time.monotonic() - stopped_at < 3 * STALENESS_S:
            time.sleep(0.05)
            decided.append(topic_error(alice, "sec-nowhere"))
        refused_at = time.monotonic()
        print(
            f"staleness: refused {(refused_at - stopping_at) * 1000:.0f} ms after pg_ctl stop began,"
            f" {(refused_at - stopped_at) * 1000:.0f} ms after it returned (bound {STALENESS_S} s)"
        )
        assert decided[-1] == ErrorCode.request_timed_out
        assert set(decided[:-1]) == {ErrorCode.topic_authorization_failed}, "decided on the copy until then"
        # The last good poll was at most one interval (plus its round trip) before the database went.
        assert refused_at - stopping_at >= STALENESS_S - POLL_S - 0.3
        assert refused_at - stopped_at <= STALENESS_S + 1.0
        assert topic_error(admin, "sec-nowhere") == ErrorCode.unknown_topic_or_partition, "super user"
        code, _ = scram_login(node, ALICE, ALICE_PASSWORD)
        assert code == ErrorCode.sasl_authentication_failed
        reasons = [e.get("reason", "") for e in node.events("sasl.authentication_failed")]
        assert any("stale" in reason for reason in reasons), reasons
        node.wait_for_event("shared_state.stale", timeout=STALENESS_S)
        (age,) = metric_samples(node, "kcoord_shared_state_age_seconds")
        assert age.value > STALENESS_S

        own_postgres.start_server()
        recovered = wait_until(
            lambda: topic_error(alice, "sec-nowhere") == ErrorCode.topic_authorization_failed,
            30,
            "decisions again once the database is back",
        )
        print(f"staleness: deciding again {recovered * 1000:.0f} ms after the database restarted")
        code, client = scram_login(node, ALICE, ALICE_PASSWORD)
        assert code == ErrorCode.none and client is not None
        (age,) = metric_samples(node, "kcoord_shared_state_age_seconds")
        assert age.value < STALENESS_S
        client.close()
        assert node.error_lines() == []
    finally:
        alice.close()
        admin.close()
        node.kill()
