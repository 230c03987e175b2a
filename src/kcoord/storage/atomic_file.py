"""Small files replaced whole and durably: the one way kcoord rewrites a state file.

Used for the topic catalogue, the ACLs, the SCRAM credentials, group configs, the node identity, the
producer-id reservation, producer snapshots, the rebalance journal and a log's start offset.

The bytes go to ``<name>.tmp`` beside the file, are fsynced, renamed over the file, and the directory
is fsynced. Without that last step a power loss can bring the directory entry back as the old file
after the rename was acknowledged: for the producer-id block that would hand out ids twice. After a
crash the file is either the old or the new content, never torn.
Blocking: call it from a thread (``asyncio.to_thread``), never on the event loop.
"""

from __future__ import annotations

import os
from pathlib import Path

from kcoord.storage.file_segment import fsync_directory

__all__ = ["write_atomically", "write_synced", "write_text_atomically"]


def write_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path``'s content with ``data`` in one durable step, creating its directory.

    ``mode`` is the permission of a newly created file (before the umask), 0o600 for secrets.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(path.name + ".tmp")
    write_synced(staged, data, mode)
    os.replace(staged, path)
    fsync_directory(path.parent)


def write_synced(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` as the whole of ``path`` and fsync it (not its directory: no rename yet)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """:func:`write_atomically` for UTF-8 text."""
    write_atomically(path, text.encode("utf-8"), mode)
