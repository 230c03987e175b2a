"""What a start prints: a failed start at a terminal shows its one ``kcoord:`` line alone, while a
failed start into a pipe keeps the held log lines before it, and a good start writes them all."""

from __future__ import annotations

import os
import pty
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import KcoordProcess


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def _command(data_dir: Path, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kcoord",
        "serve",
        "--data-dir",
        str(data_dir),
        "--listen",
        f"127.0.0.1:{port}",
        "--metrics-listen",
        "127.0.0.1:0",
    ]


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}


def _read_terminal(fd: int, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> str:
    """Everything the process wrote to the terminal ``fd`` until it exited."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal closed: the process is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(max(1.0, deadline - time.monotonic()))
    return b"".join(chunks).decode("utf-8", "replace")


def test_a_failed_start_at_a_terminal_prints_only_its_kcoord_line(tmp_path: Path, busy_port: int) -> None:
    """With stderr on a terminal, a start on a busy port prints exactly one line, ``kcoord: ...``,
    and exits 4."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        _command(tmp_path / "data", busy_port),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=secondary,
        env=_environment(),
    )
    os.close(secondary)
    try:
        output = _read_terminal(primary, proc)
    finally:
        os.close(primary)
    lines = [line for line in output.replace("\r", "").split("\n") if line.strip()]
    assert proc.returncode == 4
    assert lines == [
        f"kcoord: cannot listen on 127.0.0.1:{busy_port} (listeners, --listen): address already in use"
    ]


def test_a_failed_start_into_a_pipe_keeps_the_log_lines_before_its_kcoord_line(tmp_path: Path) -> None:
    """With stderr on a pipe, the held JSON log lines of a start that failed after opening its store
    (a corrupt ``topics.json``) come first and the ``kcoord:`` line last."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "topics.json").write_text("{not json")
    result = subprocess.run(_command(data, 0), capture_output=True, text=True, timeout=60, env=_environment())
    lines = result.stderr.splitlines()
    assert result.returncode == 3
    assert lines[-1].startswith(f"kcoord: data directory {data} cannot be used")
    assert lines[:-1] and all(line.startswith("{") for line in lines[:-1])


def test_a_good_start_writes_the_held_lines_up_to_kcoord_started(kcoord: KcoordProcess) -> None:
    """A start that succeeds writes every line it held, in order, ending with kcoord.started."""
    events = [event["event"] for event in kcoord.logs]
    started = events.index("kcoord.started")
    assert "log_store.opened" in events[:started]
