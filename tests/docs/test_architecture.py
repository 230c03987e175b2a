"""docs/architecture.md, the map of state, names only modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "architecture.md"


def _exists(path: str) -> bool:
    """A module file, or a package when the path ends with a slash."""
    return (ROOT / path).is_dir() if path.endswith("/") else (ROOT / path).is_file()


def test_every_module_path_the_map_of_state_names_exists() -> None:
    """Each `src/...` path in the map is a module (or package) of the repository, and the map names
    the modules of every kind of state it covers (at least the runtime and each store)."""
    named = set(re.findall(r"`(src/[^`\s]+)`", MAP.read_text(encoding="utf-8")))
    missing = sorted(path for path in named if not _exists(path))
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
    assert {
        "src/kcoord/runtime/coordinator_type.py",
        "src/kcoord/cluster/topic_manager.py",
        "src/kcoord/cluster/producer_state.py",
        "src/kcoord/security/acl_store.py",
        "src/kcoord/security/credentials.py",
        "src/kcoord/runtime/group_config_store.py",
    } <= named
