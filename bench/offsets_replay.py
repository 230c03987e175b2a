"""How long a restart takes to load ``__consumer_offsets``: until every partition is ACTIVE.

The section's server first receives ``--offsets-replay-groups`` (10,000) OffsetCommits of
``--offsets-replay-partitions`` (100) partitions each, as simple groups (generation -1, no member),
over ``--offsets-replay-connections`` (16) raw-protocol connections: one record per partition, so
1,000,000 records by default, written by the server's own commit path. Then, per run, the server is
stopped (SIGTERM) and a new one started on the same data directory, and the section waits for its
``offsets_partitions.loaded`` log event. Reported: the load as the server timed it (from the start
of loading to the last partition ACTIVE), the time from process start to that event, records
loaded and records/s. The server logs ``offsets_partitions.loading`` progress every 2 s meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import time
from typing import Any

import wire
from report import Measurement
from server import BenchServer, running_kcoord

DESCRIPTION = "restart with 1,000,000 committed offsets: time until every offsets partition is ACTIVE"
TOPIC = "bench-replay"
LOADED_EVENT = "offsets_partitions.loaded"
_SIZE = struct.Struct(">i")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("offsets_replay")
    group.add_argument("--offsets-replay-groups", type=int, default=10_000, help="groups (10,000)")
    group.add_argument(
        "--offsets-replay-partitions", type=int, default=100, help="partitions committed per group (100)"
    )
    group.add_argument(
        "--offsets-replay-connections", type=int, default=16, help="connections writing the commits (16)"
    )
    group.add_argument(
        "--offsets-replay-timeout", type=float, default=120.0, help="longest wait for a load, s (120)"
    )


def _commit_frame(group_id: str, partitions: int, correlation_id: int) -> bytes:
    body = {
        "group_id": group_id,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {"partition_index": p, "committed_offset": 1000 + p, "committed_metadata": ""}
                    for p in range(partitions)
                ],
            }
        ],
    }
    return wire.encode_request(wire.OFFSET_COMMIT, 8, body, correlation_id)


async def _write_share(bootstrap: str, groups: list[str], partitions: int) -> None:
    """Commit each group's offsets in turn on one connection, checking every answer."""
    host, _, port = bootstrap.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        for index, group_id in enumerate(groups):
            writer.write(_commit_frame(group_id, partitions, index))
            size = _SIZE.unpack(await reader.readexactly(4))[0]
            response: Any = wire.decode_response(wire.OFFSET_COMMIT, 8, await reader.readexactly(size))
            codes = {int(p.error_code) for t in response.topics for p in t.partitions}
            if codes != {0}:
                raise RuntimeError(f"OffsetCommit of {group_id}: error codes {sorted(codes)}")
    finally:
        writer.close()


async def _write_all(bootstrap: str, groups: int, partitions: int, connections: int) -> None:
    names = [f"bench-replay-{i}" for i in range(groups)]
    shares = [names[i::connections] for i in range(connections)]
    await asyncio.gather(*(_write_share(bootstrap, share, partitions) for share in shares if share))


def run(server: BenchServer, options: argparse.Namespace) -> list[Measurement]:
    groups, partitions = options.offsets_replay_groups, options.offsets_replay_partitions
    wire.create_topic(server.bootstrap, TOPIC, partitions)
    started = time.monotonic()
    asyncio.run(_write_all(server.bootstrap, groups, partitions, options.offsets_replay_connections))
    written = time.monotonic() - started
    print(f"  {groups * partitions:,} offset commits written in {written:.1f} s", flush=True)
    server.stop()
    load_ms: list[float] = []
    to_active_s: list[float] = []
    records: list[float] = []
    for run_number in range(options.runs):
        with running_kcoord(server.settings, data_dir=server.data_dir, watch=[LOADED_EVENT]) as again:
            seen = again.events.wait(LOADED_EVENT, options.offsets_replay_timeout)
            if seen is None:
                raise RuntimeError(f"no {LOADED_EVENT} within {options.offsets_replay_timeout} s")
            arrived, event = seen
        load_ms.append(float(event["duration_ms"]))
        to_active_s.append(arrived - again.spawned_at)
        records.append(float(event["records"]))
        print(
            f"  run {run_number + 1}: {event['records']:,} records in {event['partitions']} partitions "
            f"loaded in {load_ms[-1] / 1000:.2f} s ({to_active_s[-1]:.2f} s from process start)",
            flush=True,
        )
    label = f"{groups * partitions:,} offset commits ({groups:,} groups x {partitions})"
    return [
        Measurement(label, "load s (target <= 5)", tuple(ms / 1000 for ms in load_ms)),
        Measurement(label, "process start to all ACTIVE s", tuple(to_active_s)),
        Measurement(label, "records loaded", tuple(records)),
        Measurement(
            label, "records/s", tuple(r / (ms / 1000) for r, ms in zip(records, load_ms, strict=True))
        ),
    ]
