"""What one group-commit round's durability costs, per way of syncing: ``syncfs`` or ``fdatasync``.

A round under flush policy ``always`` appends to some partition logs and must make them durable
before any of its commits is answered (:mod:`kcoord.storage.durable_sync`). This section measures
that step alone, in this process, on files in a temporary directory on the data directory's
filesystem (``--sync-rounds-dir``, default the system temporary directory): per round, an
OffsetCommit-sized record (``--sync-rounds-bytes``, 150) is appended to each of F files (each of
``--sync-rounds-files``: 1, 8, 32; 50 groups land on about 32 of the 50 ``__consumer_offsets``
partitions), then the files are made durable by

- ``syncfs``: one ``syncfs(2)`` for the filesystem (writes back everything dirty on it, other
  processes' writes too);
- ``fdatasync serial``: one ``fdatasync`` per file, one after the other;
- ``fdatasync aio``: one ``fdatasync`` per file, all submitted at once through Linux AIO and
  awaited in one ``io_getevents`` (:mod:`kcoord.storage.aio_fdatasync`, what kcoord does);
- ``fdatasync xN``: one ``fdatasync`` per file, issued at once from a pool of N threads
  (``--sync-rounds-threads``: 4, 16).

The ways alternate round by round (``--sync-rounds-rounds``, 200 of each per run), so a change in
the machine's load hits each alike. Reports per way and F the median and p99 of a round's sync in
milliseconds. The section's server subprocess is not used.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kcoord.storage.aio_fdatasync import AioFdatasync, open_aio_fdatasync
from kcoord.storage.durable_sync import sync_files as kcoord_sync_files
from kcoord.storage.durable_sync import syncfs_available
from report import Measurement
from server import BenchServer

DESCRIPTION = "one round's durability (syncfs / fdatasync serial / fdatasync from a pool): ms per round"

Sync = Callable[[Sequence[int]], None]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sync_rounds")
    group.add_argument("--sync-rounds-dir", default=tempfile.gettempdir(), help="where the files go")
    group.add_argument("--sync-rounds-files", default="1,8,32", help="files per round (1,8,32)")
    group.add_argument("--sync-rounds-threads", default="4,16", help="pool sizes for fdatasync (4,16)")
    group.add_argument("--sync-rounds-rounds", type=int, default=200, help="rounds per way and run (200)")
    group.add_argument("--sync-rounds-bytes", type=int, default=150, help="bytes appended per file (150)")


def _syncfs(fds: Sequence[int]) -> None:
    kcoord_sync_files(fds)


def _serial(fds: Sequence[int]) -> None:
    for fd in fds:
        os.fdatasync(fd)


def _pooled(pool: ThreadPoolExecutor) -> Sync:
    def sync(fds: Sequence[int]) -> None:
        for done in [pool.submit(os.fdatasync, fd) for fd in fds]:
            done.result()

    return sync


def _ways(pools: dict[int, ThreadPoolExecutor], aio: AioFdatasync | None) -> dict[str, Sync]:
    ways: dict[str, Sync] = {}
    if syncfs_available():
        ways["syncfs"] = _syncfs
    ways["fdatasync serial"] = _serial
    if aio is not None:
        ways["fdatasync aio"] = aio.sync
    for threads, pool in pools.items():
        ways[f"fdatasync x{threads}"] = _pooled(pool)
    return ways


def _measure(
    directory: Path, files: int, ways: dict[str, Sync], options: argparse.Namespace
) -> dict[str, list[float]]:
    """Seconds per round for each way, ways alternating round by round."""
    record = os.urandom(options.sync_rounds_bytes)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    fds = [os.open(directory / f"log-{i}", flags, 0o644) for i in range(files)]
    try:
        for fd in fds:
            os.fsync(fd)
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(options.sync_rounds_rounds):
            for name, sync in ways.items():
                for fd in fds:
                    os.write(fd, record)
                started = time.perf_counter()
                sync(fds)
                seconds[name].append(time.perf_counter() - started)
        return seconds
    finally:
        for fd in fds:
            os.close(fd)


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    del server
    counts = [int(n) for n in options.sync_rounds_files.split(",")]
    pools = {int(n): ThreadPoolExecutor(max_workers=int(n)) for n in options.sync_rounds_threads.split(",")}
    medians: dict[tuple[str, int], list[float]] = {}
    p99s: dict[tuple[str, int], list[float]] = {}
    aio = open_aio_fdatasync()
    try:
        ways = _ways(pools, aio)
        for _ in range(options.runs):
            for files in counts:
                with tempfile.TemporaryDirectory(dir=options.sync_rounds_dir) as directory:
                    for name, seconds in _measure(Path(directory), files, ways, options).items():
                        medians.setdefault((name, files), []).append(statistics.median(seconds) * 1000)
                        p99s.setdefault((name, files), []).append(_p99(seconds) * 1000)
    finally:
        for pool in pools.values():
            pool.shutdown()
        if aio is not None:
            aio.close()
    measurements: list[Measurement] = []
    for (name, files), values in medians.items():
        measurements.append(Measurement(f"{name}, {files} files: median", "ms/round", tuple(values)))
        p99 = tuple(p99s[(name, files)])
        measurements.append(Measurement(f"{name}, {files} files: p99", "ms/round", p99))
    return measurements
