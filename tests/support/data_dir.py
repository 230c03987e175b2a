"""A data directory as a listing to compare: every entry with its size and sha256, so a test can
show that a refused start read nothing for writing and wrote nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["listing"]


def listing(root: Path) -> dict[str, tuple[str, int, str]]:
    """Relative path -> (kind, size, sha256) of every file and directory under ``root``."""
    entries: dict[str, tuple[str, int, str]] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_dir():
            entries[name] = ("dir", 0, "")
        else:
            data = path.read_bytes()
            entries[name] = ("file", len(data), hashlib.sha256(data).hexdigest())
    return entries
