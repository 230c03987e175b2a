"""Whole-file replacement on a real directory: the new text lands, no staging file is left."""

from __future__ import annotations

from pathlib import Path

from kcoord.storage.atomic_file import write_text_atomically


def test_a_file_is_created_with_its_directory_and_then_replaced(tmp_path: Path) -> None:
    path = tmp_path / "state" / "acls.json"
    write_text_atomically(path, "first\n")
    write_text_atomically(path, "second ✓\n")
    assert path.read_text(encoding="utf-8") == "second ✓\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["acls.json"]
