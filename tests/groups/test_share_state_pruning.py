"""``__share_group_state`` pruned under a real ShareConsumer: kcoord deletes the records its snapshots
made redundant while acknowledgements flow, and a SIGKILL and restart rebuild the same share state
from the shorter log on disk."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.protocol.api_keys import ApiKey
from tests.protocol.in_process import AsyncRawClient
from tests.support.server import KcoordProcess
from tests.support.share_consumers import (
    STATE_LOCK,
    create_topic,
    new_consumer,
    produce_numbers,
    start_members,
    wait_for,
    wait_until_share_partition_loaded,
)

CHUNKS = 30
CHUNK = 50
SETTINGS = {
    "share.coordinator.state.topic.num.partitions": "1",
    "share.coordinator.snapshot.update.records.per.snapshot": "2",
    "share.coordinator.state.topic.prune.interval.ms": "200",
    "share.coordinator.cold.partition.snapshot.interval.ms": "1000",
}


def _pruned_offsets(server: KcoordProcess) -> float:
    """``kcoord_share_state_pruned_offsets_total`` from the server's /metrics."""
    with urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    samples = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kcoord_share_state_pruned_offsets_total"
    ]
    return sum(samples)


async def _start_offset(port: int) -> tuple[int, int]:
    """DescribeShareGroupOffsets of the group's one partition: (start offset, lag)."""
    client = await AsyncRawClient.connect(port, "share-offsets")
    try:
        request = {"groups": [{"group_id": "pruned", "topics": [{"topic_name": "jobs", "partitions": [0]}]}]}
        described: Any = await client.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, request)
    finally:
        await client.close()
    (partition,) = described.groups[0].topics[0].partitions
    return int(partition.start_offset), int(partition.lag)


@pytest.mark.slow
def test_a_pruned_share_state_log_rebuilds_the_same_state_after_a_sigkill(tmp_path: Path) -> None:
    """An explicit-mode ShareConsumer acknowledges 1,500 records in 30 commits while kcoord prunes
    every 200 ms (a snapshot every 2 updates); the state log's start moves on disk, as the pruning
    metric counts; after a SIGKILL
    and restart the share group's start offset is what it was and a new record is the only one
    delivered."""
    total = CHUNKS * CHUNK
    server = KcoordProcess(tmp_path / "data", SETTINGS).start()
    try:
        create_topic(server.bootstrap, "jobs")
        (member,) = start_members(
            1, lambda: new_consumer(server.bootstrap, "pruned", "jobs", explicit=True), explicit=True
        )
        try:
            wait_until_share_partition_loaded(server, "pruned")
            for chunk in range(CHUNKS):
                produce_numbers(server.bootstrap, "jobs", CHUNK, first=chunk * CHUNK)

                def acknowledged(want: int = (chunk + 1) * CHUNK) -> bool:
                    with STATE_LOCK:
                        return len(member.acknowledged) >= want

                wait_for(acknowledged, 60, f"chunk {chunk} acknowledged")
            wait_for(lambda: bool(server.events("share_state.pruned")), 30, "a pruning pass")
        finally:
            member.close()
        assert member.acknowledged == set(range(total))
        before = asyncio.run(_start_offset(server.port))
        assert before == (total, 0)
        start_file = tmp_path / "data" / "__share_group_state-0" / "log-start-offset"

        def settled() -> bool:
            """The last pruning (after at most one cold snapshot of the idle share partition) is what
            the log start on disk and the metric show."""
            last = server.events("share_state.pruned")[-1]["log_start_offset"]
            return int(start_file.read_text()) == last == _pruned_offsets(server)

        wait_for(settled, 30, "the pruning settled")
        pruned = server.events("share_state.pruned")[-1]
        log_start = int(start_file.read_text())
        passes = len(server.events("share_state.pruned"))
        print(f"pruning passes: {passes}, last: {pruned}, log start on disk: {log_start}")
        assert log_start == pruned["log_start_offset"] > 0

        assert log_start >= pruned["log_end_offset"] // 2, "most of the state log is gone"

        server.kill()
        server.start()
        assert asyncio.run(_start_offset(server.port)) == before
        (again,) = start_members(1, lambda: new_consumer(server.bootstrap, "pruned", "jobs"))
        try:
            wait_until_share_partition_loaded(server, "pruned")
            produce_numbers(server.bootstrap, "jobs", 1, first=total)
            wait_for(lambda: len(again.delivered) >= 1, 60, "the new record delivered")
        finally:
            again.close()
        assert again.delivered == [total]
    finally:
        server.kill()
