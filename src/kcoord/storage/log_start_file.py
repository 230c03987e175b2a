"""The file engine's record of a partition's log start offset, moved by DeleteRecords.

Kafka keeps every log's start offset in one ``log-start-offset-checkpoint`` file per data
directory; kcoord keeps one small file per partition directory instead, so a partition's state
stays in its own directory and deleting a topic removes it with the rest. The file is replaced
atomically (write, fsync, rename, fsync the directory). Blocking: call it from a worker thread.

Without the file the log starts at its first segment. A recorded start below the first segment
(retention deleted past it) or past the log end (the log was truncated) is clamped by the log.
"""

from __future__ import annotations

from pathlib import Path

from kcoord.storage.atomic_file import write_atomically

__all__ = ["LOG_START_FILE", "read_log_start", "write_log_start"]

LOG_START_FILE = "log-start-offset"


def read_log_start(directory: Path) -> int | None:
    """The recorded log start offset, or None when none was recorded (or the file is unreadable)."""
    try:
        text = (directory / LOG_START_FILE).read_text(encoding="ascii").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def write_log_start(directory: Path, offset: int) -> None:
    """Record ``offset`` durably, replacing any earlier record in one step."""
    write_atomically(directory / LOG_START_FILE, f"{offset}\n".encode("ascii"))
