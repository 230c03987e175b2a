"""kcoord at another git ref, installed in a virtualenv of its own, for A/B benchmarks.

``install(ref)`` resolves ``ref`` to a commit, exports that commit's tree (``git archive``) and
installs it (not editable, runtime dependencies only) into
``~/.cache/kcoord/bench-refs/<sha>/venv``; the directory is reused by later runs and is only
trusted once a ``ready`` marker is written after a complete install.

The default ref, "the previous main": the merge-base of ``HEAD`` and ``main`` while on a branch
(what the branch set out from), or ``HEAD^1`` (main before its last commit or merge) when
``HEAD`` is ``main`` itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kcoord" / "bench-refs"


@dataclass(frozen=True)
class InstalledRef:
    ref: str
    sha: str
    python: Path


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def previous_main() -> str:
    """The commit "then" means when no ref is named (see the module docstring)."""
    head = _git("rev-parse", "HEAD")
    base = _git("merge-base", "HEAD", "main")
    return _git("rev-parse", "HEAD^1") if base == head else base


def resolve(ref: str | None) -> str:
    return previous_main() if ref is None else _git("rev-parse", "--verify", f"{ref}^{{commit}}")


def install(ref: str | None) -> InstalledRef:
    """The ref's kcoord in its own virtualenv, built once and cached by commit."""
    sha = resolve(ref)
    home = CACHE / sha
    python = home / "venv" / "bin" / "python"
    if (home / "ready").exists() and python.exists():
        return InstalledRef(ref or "previous main", sha, python)
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    source = home / "src"
    source.mkdir()
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", "--format=tar", sha], cwd=ROOT, check=True, stdout=archive)
        archive.seek(0)
        subprocess.run(["tar", "-x", "-C", str(source)], check=True, stdin=archive)
    print(f"  installing {ref or 'previous main'} ({sha[:10]}) into {home}", flush=True)
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(home / "venv")], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(source)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (home / "ready").write_text(sha + "\n")
    return InstalledRef(ref or "previous main", sha, python)
