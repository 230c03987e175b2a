"""A share group in ``/v1/groups`` and the web console: a real confluent-kafka ShareConsumer holds
records of a partition it partly acknowledged, and the views show its member, assignment, start
offset and in-flight, acquired and archived counts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType

from tests.observability.live_group import http_get_json
from tests.support.confluent_group import group_view
from tests.support.server import KcoordProcess
from tests.support.share_consumers import (
    create_topic,
    new_consumer,
    produce_numbers,
    wait_until_share_partition_loaded,
)
from tests.support.webdriver import Browser

pytestmark = [pytest.mark.clients]

GROUP = "viewed-share"
TOPIC = "viewed-tasks"

PAGE_STATE = """
const rows = (selector) => [...document.querySelectorAll(selector)];
return {
  loaded: document.body.dataset.loaded === "true",
  groups: rows("#groups-table tbody tr").map((r) => [r.dataset.group, r.cells[2].textContent]),
  title: document.getElementById("group-title").textContent,
  shareHidden: document.getElementById("share-partitions").hidden,
  members: rows("#members-table tbody tr[data-member]").map((r) => r.cells[3].textContent),
  share: rows("#share-table tbody tr[data-topic]").map((r) => [...r.cells].map((c) => c.textContent)),
  lag: document.getElementById("card-lag").textContent,
};
"""


@pytest.fixture
def held_share_group(tmp_path: Path) -> Iterator[KcoordProcess]:
    """A server whose share group's one member accepted record 0, rejected 2 and holds 1, 3 and 4."""
    server = KcoordProcess(tmp_path / "data").start()
    consumer = None
    try:
        create_topic(server.bootstrap, TOPIC)
        consumer = new_consumer(server.bootstrap, GROUP, TOPIC, explicit=True)
        consumer.poll(0.5)
        wait_until_share_partition_loaded(server, GROUP)
        produce_numbers(server.bootstrap, TOPIC, 5)
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            got.extend(m for m in consumer.poll(0.5) if m.error() is None)
        assert sorted(int(m.value()) for m in got) == [0, 1, 2, 3, 4]
        got.sort(key=lambda m: m.offset())
        consumer.acknowledge(got[0], AcknowledgeType.ACCEPT)
        consumer.acknowledge(got[2], AcknowledgeType.REJECT)
        consumer.commit_sync(10)
        yield server
    finally:
        if consumer is not None:
            consumer.close()
        server.kill()


def test_v1_groups_shows_a_share_group_with_its_share_partition(held_share_group: KcoordProcess) -> None:
    """``/v1/groups`` lists the share group (type share, one member); ``/v1/groups/{group}`` shows the
    member's assignment and the share partition: start offset 1, four records in flight, three of them
    acquired, one archived, lag 3."""
    server = held_share_group
    listed = {g["group"]: g for g in http_get_json(str(server.metrics_address), "/v1/groups")}
    summary = listed[GROUP]
    assert (summary["type"], summary["protocol_type"], summary["state"], summary["members"]) == (
        "share",
        "share",
        "Stable",
        1,
    )
    assert summary["group_epoch"] >= 1
    view = group_view(server, GROUP)
    assert (view["type"], view["assignor"]) == ("share", "simple")
    (member,) = view["members"]
    assert member["assignment"] == {TOPIC: [0]} and member["subscribed_topics"] == [TOPIC]
    (partition,) = view["share_partitions"]
    counts = {
        k: partition[k] for k in ("start_offset", "end_offset", "in_flight", "acquired", "archived", "lag")
    }
    assert (partition["topic"], partition["partition"]) == (TOPIC, 0)
    assert counts == {
        "start_offset": 1,
        "end_offset": 5,
        "in_flight": 4,
        "acquired": 3,
        "archived": 1,
        "lag": 3,
    }


@pytest.mark.browser
def test_the_console_shows_a_share_group_and_its_share_partitions(held_share_group: KcoordProcess) -> None:
    """The console lists the share group with its type and, selected, shows its member's assignment
    and a share-partition row (start offset, in flight, acquired, archived, lag) and the lag card."""
    server = held_share_group
    with Browser() as browser:
        browser.open(f"http://{server.metrics_address}/ui#group={GROUP}")
        page = browser.wait_for(
            f"const s = (() => {{{PAGE_STATE}}})(); return s.loaded && s.share.length > 0 && s;"
        )
    assert page["groups"] == [[GROUP, "share"]] and page["title"] == GROUP
    assert page["shareHidden"] is False
    assert page["members"] == [f"{TOPIC}: 0"]
    assert page["share"] == [[TOPIC, "0", "1", "4", "3", "1", "3"]]
    assert page["lag"] == "3"
