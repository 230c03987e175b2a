"""Issue 9, "a clean shutdown hands its partitions over at once": a SIGTERMed node of a cluster
releases what it owns and exits with code 0 promptly, and still exits within its bound when the
database holds every query it sends (a lock another session keeps), instead of hanging."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from pathlib import Path

from tests.support.cluster_nodes import owners, start_nodes, wait_converged, wait_until
from tests.support.postgres import PostgresCluster
from tests.support.server import KcoordProcess

SHUTDOWN_TIMEOUT_MS = 2000
EXIT_BOUND_S = SHUTDOWN_TIMEOUT_MS / 1000 + 15.0 + 5.0
"""The drain, the stop's overall margin (``STOP_MARGIN_S``), and room for a loaded machine."""
BLOCKED_EXIT_BOUND_S = 12.0
"""Below the 15 s a query may wait (``COMMAND_TIMEOUT_S``), which an unbounded deregistration took."""
LOCKING = "kcoord-test-holds-the-lock"


def test_a_sigterm_releases_the_partitions_at_once(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """The stopped node exits 0 and no partition is recorded as its own once it has exited."""
    database = postgres_cluster.create_database()
    nodes = start_nodes(kcoord_factory, tmp_path, database, 2)
    wait_converged(nodes, postgres_cluster, database)
    assert 2 in owners(postgres_cluster, database).values()
    started = time.monotonic()
    assert nodes[1].terminate(timeout=EXIT_BOUND_S) == 0
    print(f"clean shutdown of a node owning partitions: {time.monotonic() - started:.2f}s")
    assert 2 not in owners(postgres_cluster, database).values()
    assert nodes[1].events("cluster.deregistered")


def test_a_sigterm_exits_in_bounded_time_while_the_database_blocks_every_query(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """With the partition and node tables locked by another session (every renewal, commit round
    and deregistration waits on it), the node still exits 0 within its bound; its lease lapses."""
    database = postgres_cluster.create_database()
    (node,) = start_nodes(
        kcoord_factory, tmp_path, database, 1, **{"kcoord.shutdown.timeout.ms": str(SHUTDOWN_TIMEOUT_MS)}
    )
    wait_converged([node], postgres_cluster, database)
    holder = threading.Thread(target=_hold_lock, args=(postgres_cluster, database), daemon=True)
    holder.start()
    try:
        wait_until(lambda: _lock_granted(postgres_cluster, database), 20, "the lock to be held")
        wait_until(lambda: _node_waits_on_the_lock(postgres_cluster, database), 20, "a query waiting on it")
        started = time.monotonic()
        assert node.terminate(timeout=EXIT_BOUND_S) == 0
        elapsed = time.monotonic() - started
        print(f"SIGTERM with the database blocking every query: exited in {elapsed:.2f}s")
        assert elapsed < BLOCKED_EXIT_BOUND_S
        assert node.events("kcoord.stopped") or node.events("kcoord.stop_timed_out")
    finally:
        postgres_cluster.sql(
            database,
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{LOCKING}'",
        )
        holder.join(30)


def _hold_lock(postgres: PostgresCluster, database: str) -> None:
    """Lock the ownership tables until terminated (or 120 s, whichever comes first)."""
    with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
        postgres.sql(
            f"{database}?application_name={LOCKING}",
            "BEGIN; LOCK TABLE log_partitions, cluster_nodes IN ACCESS EXCLUSIVE MODE;"
            " SELECT pg_sleep(120); COMMIT;",
        )


def _node_waits_on_the_lock(postgres: PostgresCluster, database: str) -> bool:
    """The node's renewal (or another of its queries) is queued behind the held lock."""
    waiting = postgres.sql(
        database,
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
        f" WHERE NOT l.granted AND a.datname = current_database() AND a.application_name <> '{LOCKING}'",
    )
    return int(waiting or "0") >= 1


def _lock_granted(postgres: PostgresCluster, database: str) -> bool:
    held = postgres.sql(
        database,
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
        f" WHERE a.application_name = '{LOCKING}' AND l.mode = 'AccessExclusiveLock' AND l.granted",
    )
    return int(held or "0") >= 2
