"""Every consumer-group benchmark section runs end to end at tiny sizes, so the benchmark code cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[2] / "bench" / "run.py"


def run_section(*args: str, timeout: float = 240) -> str:
    completed = subprocess.run(
        [sys.executable, str(RUN), *args, "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def test_timing_wheel_section_prints_both_timers_and_their_ratio() -> None:
    """The timing-wheel section measures the wheel, the driver and call_later and prints the ratios."""
    out = run_section("timing_wheel", "--timing-wheel-extensions", "2000", "--timing-wheel-keys", "1", "10")
    assert "wheel.schedule, 10 keys" in out
    assert "call_later+cancel (uvloop) / wheel, 1 keys" in out


def test_member_memory_section_reports_bytes_per_member() -> None:
    """The memory section builds Stable groups through the pure API and reports bytes per member."""
    out = run_section("member_memory", "--member-memory-groups", "5", "--member-memory-members", "3")
    assert "idle member, 15 in 5 groups" in out
    assert "top allocation sites" in out


def test_heartbeat_load_section_reports_rates_and_the_ratio() -> None:
    """The load generator joins its groups, runs all three phases without bad answers and prints the ratio."""
    out = run_section(
        "heartbeat_load",
        "--set",
        "group.initial.rebalance.delay.ms=0",
        "--heartbeat-load-connections",
        "4",
        "--heartbeat-load-workers",
        "1",
        "--heartbeat-load-seconds",
        "0.3",
        "--heartbeat-load-warmup",
        "0.1",
    )
    assert "heartbeat / api_versions" in out
    assert "commit (depth 1)" in out
    assert "fetch / heartbeat" in out
    assert "requests per server CPU-s" in out


def test_commit_path_section_reports_loop_cpu_per_commit_for_both_flush_policies() -> None:
    """The in-process commit-path section commits through the router under both flush policies."""
    out = run_section("commit_path", "--commit-path-groups", "3", "--commit-path-commits", "5")
    assert "flush always" in out
    assert "flush interval" in out
    assert "loop CPU us/commit" in out


def test_commit_path_section_counts_opcodes_and_calls_per_commit() -> None:
    """With --commit-path-count the section reports opcodes, Python calls and C calls per commit."""
    out = run_section(
        "commit_path",
        "--commit-path-groups",
        "3",
        "--commit-path-commits",
        "5",
        "--commit-path-depth",
        "2",
        "--commit-path-count",
    )
    for unit in ("opcodes/commit", "Python calls/commit", "C calls/commit"):
        assert unit in out
    assert "3 groups x 2, flush always" in out


def test_offsets_replay_section_writes_commits_restarts_and_times_the_load() -> None:
    """The replay section commits through a server, restarts it on the same data and reports the load."""
    out = run_section("offsets_replay", "--offsets-replay-groups", "20", "--offsets-replay-partitions", "5")
    assert "100 offset commits written" in out
    assert "100 records in 50 partitions loaded" in out
    assert "load s (target <= 5)" in out


@pytest.mark.clients
def test_group_formation_section_forms_groups_with_every_client() -> None:
    """Two consumers of each Python client form a group and the section prints one row set per client."""
    out = run_section(
        "group_formation", "--group-formation-consumers", "2", "--group-formation-delays", "0", timeout=280
    )
    for client in ("kafka-python", "confluent", "aiokafka"):
        assert f"{client}, delay 0 ms: formed" in out


def test_fuzz_section_reports_requests_bystander_and_rss() -> None:
    """The fuzz section sends its frames for a second and prints counts, bystander latency and RSS."""
    out = run_section("fuzz", "--fuzz-seconds", "1")
    assert "requests per API:" in out
    assert "bystander worst" in out
    assert "rss max" in out


@pytest.mark.slow
def test_storage_engines_section_compares_postgresql_with_file() -> None:
    """The section runs the same load on file:// and on a throwaway PostgreSQL and prints the ratios."""
    out = run_section(
        "storage_engines",
        "--set",
        "group.initial.rebalance.delay.ms=0",
        "--storage-engines-connections",
        "4",
        "--storage-engines-workers",
        "1",
        "--storage-engines-seconds",
        "0.3",
        "--storage-engines-warmup",
        "0.1",
    )
    assert "commit on postgresql" in out
    assert "heartbeat on file" in out
    assert "commit postgresql / file" in out


@pytest.mark.slow
def test_storage_memory_section_reports_rss_and_the_cold_fetch() -> None:
    """The section fills a throwaway PostgreSQL, starts one node then three, prints RSS and the fetch rate."""
    out = run_section("storage_memory", "--storage-memory-mb", "6", "--storage-memory-partitions", "3")
    assert "one node serving all: RSS after start" in out
    assert "3 nodes: largest peak RSS at start" in out
    assert "cold fetch of the whole topic" in out


def test_secure_load_section_compares_sasl_ssl_with_plaintext() -> None:
    """The secure section logs in over SASL_SSL, runs heartbeat and commit on each listener, prints ratios."""
    out = run_section(
        "secure_load",
        "--set",
        "group.initial.rebalance.delay.ms=0",
        "--secure-load-connections",
        "3",
        "--heartbeat-load-seconds",
        "0.3",
        "--heartbeat-load-warmup",
        "0.1",
    )
    assert "heartbeat SASL_SSL / PLAINTEXT" in out
    assert "commit SASL_SSL / PLAINTEXT" in out
    assert "ratio per server CPU-s" in out


@pytest.mark.stress
def test_limits_section_reports_heartbeat_latency_per_phase() -> None:
    """The limits section runs its three phases against a descriptor-limited server and prints them."""
    out = run_section(
        "limits",
        "--limits-quiet-seconds",
        "0.5",
        "--limits-slow-connections",
        "20",
        "--limits-flood-topics",
        "20",
        "--limits-non-readers",
        "2",
        "--limits-pipelined",
        "100",
        "--limits-large-frames",
        "1",
    )
    assert "heartbeat flood p99" in out
    assert "heartbeat p99 slow / quiet" in out
    assert "peak rss" in out


@pytest.mark.clients
def test_consumer_protocol_section_compares_the_protocols() -> None:
    """The KIP-848 section forms and grows a group in every mode and prints the unowned time."""
    out = run_section("consumer_protocol", "--consumer-protocol-consumers", "2")
    for mode in ("classic eager", "classic cooperative", "consumer"):
        assert f"{mode}: join of 1 more" in out
        assert f"{mode}: unowned during join" in out
    assert "inf" not in out


def test_compare_runs_head_against_itself_and_prints_every_ratio() -> None:
    """``run.py compare HEAD`` installs HEAD in its own virtualenv, runs both in turn and prints the table."""
    out = run_section(
        "compare",
        "HEAD",
        "--compare-connections",
        "4",
        "--compare-connections-depth1",
        "4",
        "--compare-workers",
        "1",
        "--compare-seconds",
        "0.3",
        "--compare-warmup",
        "0.1",
        "--compare-members",
        "3",
        "--compare-formations",
        "2",
        timeout=420,
    )
    for op in (
        "Heartbeat, 4 in flight",
        "Heartbeat, 1 in flight",
        "OffsetCommit (always)",
        "OffsetFetch",
        "Metadata",
        "JoinGroup formation",
    ):
        assert op in out
    assert "now/then" in out
    assert "pair 1 now" in out and "pair 1 then" in out


def test_metadata_flood_section_creates_topics_and_times_the_bystander() -> None:
    """The flood section auto-creates its topics through Metadata and reports topics/s, heartbeat p99 and the
    server's longest garbage-collection pause."""
    out = run_section("metadata_flood", "--metadata-flood-topics", "40", "--metadata-flood-per-request", "20")
    assert "topics created" in out and "40" in out
    assert "topics/s" in out
    assert "heartbeat p99" in out
    assert "gc pause max" in out


def test_members_scale_section_holds_members_and_reports_latency_and_memory() -> None:
    """The scale section forms groups of ten over a connection each and reports p99, RSS and CPU."""
    out = run_section(
        "members_scale",
        "--members-scale-steps",
        "20",
        "--members-scale-workers",
        "2",
        "--members-scale-interval",
        "0.3",
        "--members-scale-seconds",
        "1",
        "--members-scale-p99-ms",
        "100000",
    )
    assert "20 members" in out
    assert "heartbeat p99 ms" in out
    assert "RSS per member KiB" in out
    assert "formation s" in out


@pytest.mark.clients
def test_transactions_section_compares_the_transactional_loop_with_the_plain_one() -> None:
    """The transactions section copies with and without transactions, prints rates, ratio and EndTxn p99."""
    out = run_section("transactions", "--transactions-records", "200", "--transactions-sizes", "20", "100")
    for size in (20, 100):
        assert f"{size}/txn transactional" in out and f"{size}/txn plain" in out
        assert f"{size}/txn records/s transactional / plain" in out
        assert f"{size}/txn EndTxn p99 (commit_transaction)" in out
        assert f"{size}/txn EndTxn p99, server histogram bucket" in out
        assert f"{size}/txn AddPartitionsToTxn requests per transaction" in out
    assert "nan" not in out


@pytest.mark.clients
def test_share_groups_section_compares_share_consumers_with_a_classic_group() -> None:
    """The share-groups section acknowledges every record with each consumer count and the classic group."""
    out = run_section(
        "share_groups",
        "--share-groups-records",
        "300",
        "--share-groups-consumers",
        "1",
        "2",
        "--share-groups-classic-partitions",
        "2",
    )
    for label in ("1 share consumer, 1 partition", "2 share consumers, 1 partition"):
        assert f"{label}: acknowledged" in out
        assert f"{label}: commit_sync (ShareAcknowledge) p99" in out
        assert f"{label}: ShareAcknowledge p99, server bucket" in out
    assert "classic group, 2 consumers, 2 partitions: acknowledged" in out
    assert "nan" not in out
