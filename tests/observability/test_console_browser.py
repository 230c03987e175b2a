"""The web console in a real browser: headless Chromium loads /ui from a live server whose group of
real confluent-kafka consumers rebalanced, reads the DOM, follows a live change, saves a screenshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.confluent_group import make_consumer, poll_until, stable_with
from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.support.webdriver import Browser

pytestmark = [pytest.mark.clients, pytest.mark.browser]

GROUP = "console-watchers"
TOPIC = "console-topic"
PARTITIONS = 4


PAGE_STATE = """
const rows = (selector) => [...document.querySelectorAll(selector)];
return {
  loaded: document.body.dataset.loaded === "true",
  groups: rows("#groups-table tbody tr").map((r) => r.dataset.group),
  selected: rows("#groups-table tbody tr.selected").map((r) => r.dataset.group),
  title: document.getElementById("group-title").textContent,
  state: document.getElementById("group-state").textContent,
  protocol: document.getElementById("card-protocol").textContent,
  members: rows("#members-table tbody tr[data-member]").map((r) => r.cells[1].textContent),
  assignments: rows("#members-table tbody tr[data-member]").map((r) => r.cells[3].textContent),
  offsets: rows("#offsets-table tbody tr[data-topic]").length,
  rebalances: rows("#timeline g.rebalance").map((g) => g.dataset.trigger),
  joinBars: rows("#timeline rect.phase-join").length,
  syncBars: rows("#timeline rect.phase-sync").length,
  chartWidth: document.getElementById("timeline").getBoundingClientRect().width,
};
"""


def test_console_shows_a_group_that_rebalanced(
    kcoord: KcoordProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Groups, state, members, assignments, lag and a rebalance timeline appear, and follow a leave live."""
    bootstrap = kcoord.bootstrap
    create_topic(bootstrap, TOPIC, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        producer.produce(TOPIC, value=b"m%d" % i, partition=i % PARTITIONS)
    assert producer.flush(20) == 0

    first = make_consumer(bootstrap, GROUP, TOPIC, "console-first")
    second: Consumer | None = None
    try:
        poll_until([first], lambda: stable_with(kcoord, GROUP, 1, 1), "the first member to settle")
        second = make_consumer(bootstrap, GROUP, TOPIC, "console-second")
        poll_until([first, second], lambda: stable_with(kcoord, GROUP, 2, 2), "the join of a second member")
        committed = sum(
            tp.offset > 0
            for tp in first.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        )
        assert committed > 0

        with Browser() as browser:
            browser.open(f"http://{kcoord.metrics_address}/ui#group={GROUP}")
            page = browser.wait_for(
                f"const s = (() => {{{PAGE_STATE}}})(); return s.loaded && s.members.length === 2 && s;"
            )
            assert page["groups"] == [GROUP] and page["selected"] == [GROUP]
            assert (page["title"], page["state"]) == (GROUP, "Stable")
            assert page["protocol"].startswith("consumer / ")
            assert sorted(page["members"]) == ["console-first", "console-second"]
            assert all(TOPIC in text for text in page["assignments"])
            assert page["offsets"] > 0
            assert len(page["rebalances"]) >= 2 and page["joinBars"] >= 2 and page["syncBars"] >= 2
            assert page["chartWidth"] > 600

            # Live: the second member leaves; the open page follows without a reload.
            second.close()
            second = None
            poll_until([first], lambda: stable_with(kcoord, GROUP, 1, 3), "the rebalance after the leave")
            page = browser.wait_for(
                f"const s = (() => {{{PAGE_STATE}}})();"
                " return s.members.length === 1 && s.syncBars >= 3 && s;"
            )
            assert page["members"] == ["console-first"]
            assert page["rebalances"][0] != "" and len(page["rebalances"]) >= 3

            shot = browser.screenshot(tmp_path / "console.png")
        assert shot.stat().st_size > 10_000
        with capsys.disabled():
            print(f"\nconsole screenshot: {shot}")
    finally:
        if second is not None:
            second.close()
        first.close()
