"""The web console in headless Chromium shows the open transaction holding a group's offsets, then
the group's last transaction once its marker is written.

A real :class:`App` runs in the test's loop; the browser is driven from a worker thread so the
loop keeps serving the page's ``/v1`` requests. The transaction coordinator's marker is written
in process through ``App.coordinator.write_end_marker`` (contract B).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kcoord.protocol.api_keys import ApiKey
from tests.apis.groups.test_txn_offset_commit import PRODUCER_ID, end_transaction, txn_commit_body, with_topic
from tests.protocol.in_process import connected, running_app
from tests.support.webdriver import Browser

pytestmark = [pytest.mark.browser]

GROUP = "console-txn"

TRANSACTIONS = """
const rows = [...document.querySelectorAll("#transactions-table tbody tr")];
const ready = document.body.dataset.loaded === "true"
  && document.getElementById("group-title").textContent === arguments[0];
return ready && rows.map((r) => [...r.cells].map((c) => c.textContent));
"""


def wait_for_rows(browser: Browser, expected_text: str) -> Any:
    """The table's rows (cell texts) once the group's page is loaded and they contain ``expected_text``."""
    rows = TRANSACTIONS.replace("arguments[0]", repr(GROUP))
    found = f"r.flat().join(' ').includes({expected_text!r})"
    return browser.wait_for(f"const r = (() => {{{rows}}})(); return r && {found} && r;")


async def test_console_shows_the_open_transaction_then_its_commit(tmp_path: Path) -> None:
    """While a TxnOffsetCommit is pending the console lists its producer, epoch and pending offsets;
    after the commit marker the table says none is open and names the last transaction's result."""
    async with running_app(tmp_path) as (app, port), connected(port) as client:
        await with_topic(client, app, port)
        committed = await client.call(ApiKey.TXN_OFFSET_COMMIT, 3, txn_commit_body(GROUP, {1: 33}, epoch=4))
        assert committed.topics[0].partitions[0].error_code == 0
        assert app.http.bound is not None
        host, http_port = app.http.bound
        browser = await asyncio.to_thread(Browser)
        try:
            await asyncio.to_thread(browser.open, f"http://{host}:{http_port}/ui#group={GROUP}")
            rows = await asyncio.to_thread(wait_for_rows, browser, "orders-1 @ 33")
            assert rows == [[str(PRODUCER_ID), "4", "orders-1 @ 33"]]
            await end_transaction(app, GROUP, committed=True, epoch=4)
            rows = await asyncio.to_thread(wait_for_rows, browser, "commit")
            assert rows == [[f"none open; last: producer {PRODUCER_ID} commit"]]
        finally:
            await asyncio.to_thread(browser.close)
