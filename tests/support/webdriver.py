"""A headless Chromium driven through chromedriver's W3C WebDriver HTTP API, with the standard library.

Enough for the console's browser test: open a page, run a script that reads the DOM, wait for a
condition, take a screenshot. No selenium: five endpoints of the protocol are all it needs.
Chromium runs as root here, hence ``--no-sandbox``; a fresh profile directory per session.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
]


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Browser:
    """One chromedriver process and one browser session; use as a context manager."""

    def __init__(self, width: int = 1440, height: int = 1000) -> None:
        binary, driver = chromium_binary(), shutil.which("chromedriver")
        if binary is None or driver is None:
            raise RuntimeError("chromium and chromedriver are needed (scripts/test.sh apt-installs them)")
        self._profile = tempfile.mkdtemp(prefix="kcoord-chromium-")
        self._port = _free_port()
        self._driver = subprocess.Popen(
            [driver, f"--port={self._port}", "--allowed-ips=127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_until_ready()
        options = {"binary": binary, "args": [*CHROMIUM_ARGS, f"--user-data-dir={self._profile}"]}
        capabilities = {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}
        created = self._call("POST", "/session", {"capabilities": capabilities})
        self._session = f"/session/{created['sessionId']}"
        self._call("POST", f"{self._session}/window/rect", {"width": width, "height": height})

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _wait_until_ready(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if self._call("GET", "/status").get("ready"):
                    return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.1)
        raise RuntimeError("chromedriver did not become ready")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self._port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read())["value"]
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"webdriver {method} {path}: {exc.read()[:500]!r}") from exc

    def open(self, url: str) -> None:
        self._call("POST", f"{self._session}/url", {"url": url})

    def run(self, script: str, *args: Any) -> Any:
        """The value of ``script`` (a function body; ``arguments`` holds ``args``) run in the page."""
        return self._call("POST", f"{self._session}/execute/sync", {"script": script, "args": list(args)})

    def wait_for(self, script: str, timeout_s: float = 30.0) -> Any:
        """Run ``script`` until it returns something truthy; that value."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.run(script)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never satisfied: {script}")
            time.sleep(0.25)

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self._call("GET", f"{self._session}/screenshot")))
        return path

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, AttributeError):
            self._call("DELETE", self._session)
        self._driver.terminate()
        try:
            self._driver.wait(10)
        except subprocess.TimeoutExpired:
            self._driver.kill()
        shutil.rmtree(self._profile, ignore_errors=True)
