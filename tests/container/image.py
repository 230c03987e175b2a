"""Builds and runs kcoord's image with no registry and no Docker engine.

1. A Debian base with python3 from Debian packages: mmdebstrap, with the host's own apt sources for the
   host's release, cached as a tarball per day.
2. buildah (vfs storage under a scratch directory, chroot isolation) imports the tarball as an image and
   builds the Dockerfile with ``--build-arg BASE=`` that image; pip in the build installs from a wheelhouse
   made on the host and mounted into the build, so the build itself needs no index.
3. ``buildah from`` + ``buildah run --network host`` runs the image's command; it then binds loopback
   addresses given through the environment.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path

from tests.container.files import REPO

BASE_PACKAGES = ("python3", "python3-venv")
_EXCLUDED_PATHS = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")
CACHE_DIR = Path(tempfile.gettempdir()) / "kcoord-container-cache"


def _run(command: Sequence[str], *, timeout: float, cwd: Path | None = None) -> str:
    done = subprocess.run(
        list(command), capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd
    )
    assert done.returncode == 0, f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return done.stdout


def host_codename() -> str:
    text = Path("/etc/os-release").read_text()
    match = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", text, flags=re.MULTILINE)
    assert match, "/etc/os-release names no VERSION_CODENAME: not a Debian host"
    return match.group(1)


def _suite_matches(suites: Sequence[str], codename: str) -> bool:
    return any(s == codename or s.startswith(codename + "-") for s in suites)


def host_apt_sources(codename: str) -> str:
    """The host's enabled apt sources for its own release, as one deb822 document (no hosts hard-coded)."""
    stanzas: list[str] = []
    apt = Path("/etc/apt")
    files = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text()
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, flags=re.MULTILINE))
                if fields.get("Enabled", "yes").lower() == "no" or "deb" not in fields.get("Types", ""):
                    continue
                if _suite_matches(fields.get("Suites", "").split(), codename):
                    stanzas.append(stanza.strip())
        elif path.name == "sources.list" or path.suffix == ".list":
            for line in text.splitlines():
                match = re.match(r"^deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.+)$", line.strip())
                if match and _suite_matches([match.group(3)], codename):
                    options = match.group(1) or ""
                    signed = re.search(r"signed-by=(\S+?)\]?\s*$", options.strip())
                    stanza = f"Types: deb\nURIs: {match.group(2)}\nSuites: {match.group(3)}\n"
                    stanza += f"Components: {match.group(4)}"
                    if signed:
                        stanza += f"\nSigned-By: {signed.group(1).rstrip(']')}"
                    stanzas.append(stanza)
    assert stanzas, f"the host has no apt source for {codename}"
    return "\n\n".join(stanzas) + "\n"


def base_tarball(codename: str) -> Path:
    """A minbase Debian root with python3 and venv, made by mmdebstrap once a day and reused."""
    sources = host_apt_sources(codename)
    key = hashlib.sha256((sources + " ".join(BASE_PACKAGES)).encode()).hexdigest()[:12]
    today = datetime.date.today().strftime("%Y%m%d")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tarball = CACHE_DIR / f"base-{codename}-{today}-{key}.tar"
    if tarball.exists():
        return tarball
    for stale in [*CACHE_DIR.glob(f"base-{codename}-*.tar"), *CACHE_DIR.glob("sources-*.sources")]:
        stale.unlink()
    sources_file = CACHE_DIR / f"sources-{key}.sources"
    sources_file.write_text(sources)
    partial = tarball.with_suffix(".partial.tar")
    _run(
        [
            "mmdebstrap",
            "--variant=minbase",
            "--mode=root",
            "--quiet",
            f"--include={','.join(BASE_PACKAGES)}",
            *(f"--dpkgopt=path-exclude={p}" for p in _EXCLUDED_PATHS),
            codename,
            str(partial),
            str(sources_file),
        ],
        timeout=600,
    )
    partial.rename(tarball)
    return tarball


def wheelhouse(dest: Path) -> Path:
    """Wheels for kcoord's dependencies and build backend, fetched on the host (which reaches the index)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    requirements = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    dest.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(dest), *requirements], timeout=600)
    return dest


class Buildah:
    """buildah on its own vfs storage under ``root`` (nothing shared with the host's containers)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def command(self, *args: str) -> list[str]:
        return [
            "buildah",
            "--root",
            str(self.root / "storage"),
            "--runroot",
            str(self.root / "run"),
            "--storage-driver",
            "vfs",
            *args,
        ]

    def __call__(self, *args: str, timeout: float = 600) -> str:
        return _run(self.command(*args), timeout=timeout)

    def import_rootfs(self, tarball: Path, tag: str) -> None:
        container = self("from", "--quiet", "scratch").strip()
        try:
            self("add", "--quiet", container, str(tarball), "/")
            self("commit", "--quiet", container, tag)
        finally:
            self("rm", container)

    def build(self, tag: str, base: str, wheels: Path) -> None:
        self(
            "bud",
            "--isolation",
            "chroot",
            "--format",
            "docker",
            "--layers=false",
            "--build-arg",
            f"BASE={base}",
            "--build-arg",
            "PIP_NO_INDEX=1",
            "--build-arg",
            "PIP_FIND_LINKS=/wheelhouse",
            "--volume",
            f"{wheels}:/wheelhouse:ro",
            "--tag",
            tag,
            "--file",
            str(REPO / "Dockerfile"),
            str(REPO),
        )


class RunningContainer:
    """One command running in a working container of the image, sharing the host's network."""

    def __init__(self, buildah: Buildah, image: str, log_path: Path) -> None:
        self.buildah = buildah
        self.name = buildah("from", "--quiet", image).strip()
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, command: Sequence[str], env: dict[str, str]) -> None:
        env_args = [arg for name, value in env.items() for arg in ("--env", f"{name}={value}")]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.buildah.command(
                    "run", "--isolation", "chroot", "--network", "host", *env_args, self.name, "--", *command
                ),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def exec(self, command: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run another command in the same container (as the image's user), beside the first."""
        return subprocess.run(
            self.buildah.command(
                "run", "--isolation", "chroot", "--network", "host", self.name, "--", *command
            ),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def wait_for_log(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            assert self.proc is not None and self.proc.poll() is None, f"exited early:\n{self.log()[-4000:]}"
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} within {timeout}s:\n{self.log()[-4000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.buildah("rm", self.name)
