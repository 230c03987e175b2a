"""Small files replaced whole and durably: the topic catalogue, the ACLs.

The text goes to ``<name>.tmp`` beside the file, is fsynced, renamed over the file, and the
directory is fsynced, so after a crash the file is either the old or the new text, never torn.
Blocking: call it from a thread (``asyncio.to_thread``), never on the event loop.
"""

from __future__ import annotations

import os
from pathlib import Path

from kcoord.storage.file_segment import fsync_directory

__all__ = ["write_text_atomically"]


def write_text_atomically(path: Path, text: str) -> None:
    """Replace ``path``'s content with ``text`` (UTF-8) in one durable step, creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)
