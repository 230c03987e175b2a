"""The web console in a real browser: headless Chromium loads /ui from a live server whose group of
real consumers (confluent-kafka, and a kafka-python member frozen with SIGSTOP so it is removed as
late) rebalanced, reads the DOM, follows a live change, and saves a screenshot."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.confluent_group import group_view, make_consumer, poll_until, stable_with
from tests.support.confluent_ops import create_topic
from tests.support.server import KcoordProcess
from tests.support.webdriver import Browser

pytestmark = [pytest.mark.clients, pytest.mark.browser]

GROUP = "console-watchers"
TOPIC = "console-topic"
PARTITIONS = 4
REBALANCE_TIMEOUT_MS = 6000
STUCK_SCRIPT = Path(__file__).with_name("stuck_consumer.py")


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
  removedMarks: rows("#timeline text.removed").length,
  chartWidth: document.getElementById("timeline").getBoundingClientRect().width,
};
"""


def late_member_removed(kcoord: KcoordProcess, members: int) -> bool:
    """Stable with ``members`` members after a rebalance that removed a member for not rejoining."""
    if not stable_with(kcoord, GROUP, members, 3):
        return False
    return any(entry["removed_not_rejoined"] for entry in group_view(kcoord, GROUP)["history"])


def test_console_shows_a_group_that_rebalanced(
    kcoord: KcoordProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Groups, state, members, assignments, lag and a rebalance timeline with a late member appear,
    and the open page follows a member leaving."""
    bootstrap = kcoord.bootstrap
    create_topic(bootstrap, TOPIC, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        producer.produce(TOPIC, value=b"m%d" % i, partition=i % PARTITIONS)
    assert producer.flush(20) == 0

    # The rebalance timeout (max.poll.interval.ms, the largest of the group) is short, so a
    # frozen member is removed as late well before its 10 s session ends.
    quick = {"max_poll_interval_ms": REBALANCE_TIMEOUT_MS, "session_timeout_ms": REBALANCE_TIMEOUT_MS}
    first = make_consumer(bootstrap, GROUP, TOPIC, "console-first", **quick)
    third: Consumer | None = None
    stuck = subprocess.Popen(
        [
            sys.executable,
            str(STUCK_SCRIPT),
            bootstrap,
            GROUP,
            TOPIC,
            "console-stuck",
            str(REBALANCE_TIMEOUT_MS),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        poll_until([first], lambda: stable_with(kcoord, GROUP, 2, 2), "the stuck member to join")
        assert stuck.stdout is not None
        ready, _, _ = select.select([stuck.stdout], [], [], 30)
        assert ready and stuck.stdout.readline().strip() == b"assigned"
        stuck.send_signal(signal.SIGSTOP)
        third = make_consumer(bootstrap, GROUP, TOPIC, "console-third", **quick)
        poll_until([first, third], lambda: late_member_removed(kcoord, 2), "the late member's removal")
        committed = sum(
            tp.offset > 0
            for tp in first.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        )
        assert committed > 0

        with Browser() as browser:
            browser.open(f"http://{kcoord.metrics_address}/ui#group={GROUP}")
            page = browser.wait_for(
                f"const s = (() => {{{PAGE_STATE}}})(); return s.loaded && s.removedMarks > 0 && s;"
            )
            assert page["groups"] == [GROUP] and page["selected"] == [GROUP]
            assert (page["title"], page["state"]) == (GROUP, "Stable")
            assert page["protocol"].startswith("consumer / ")
            assert sorted(page["members"]) == ["console-first", "console-third"]
            assert all(TOPIC in text for text in page["assignments"])
            assert page["offsets"] > 0
            assert len(page["rebalances"]) >= 3 and page["joinBars"] >= 3 and page["syncBars"] >= 3
            assert "member_joined" in page["rebalances"]
            assert page["chartWidth"] > 600

            # Live: the third member leaves; the open page follows without a reload.
            third.close()
            third = None
            poll_until([first], lambda: stable_with(kcoord, GROUP, 1, 4), "the rebalance after the leave")
            page = browser.wait_for(
                f"const s = (() => {{{PAGE_STATE}}})();"
                " return s.members.length === 1 && s.rebalances[0] === 'member_left' && s;"
            )
            assert page["members"] == ["console-first"] and page["removedMarks"] > 0

            shot = browser.screenshot(tmp_path / "console.png")
        assert shot.stat().st_size > 10_000
        with capsys.disabled():
            print(f"\nconsole screenshot: {shot}")
    finally:
        stuck.kill()
        stuck.wait(10)
        if third is not None:
            third.close()
        first.close()
