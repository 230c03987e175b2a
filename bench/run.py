"""kcoord benchmarks: ``python bench/run.py [SECTION ...] [--runs N] [--set NAME=VALUE ...]``.

``python bench/run.py compare [REF] [--runs N]`` instead runs the working tree against git ref REF
(default: the previous main) alternately and prints ratios now/then (``compare.py``).

Each section is a module next to this file that defines ``DESCRIPTION``, ``add_arguments(parser)``
and ``run(server, options) -> list[Measurement]``; add its name to ``SECTIONS`` to select it by
name. Every section gets a fresh kcoord subprocess on a free loopback port with a temporary data
directory, and prints one table: each run's figure and the median. With no section named, all run.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare
from report import format_table
from server import running_kcoord

SECTIONS = (
    "produce_fetch",
    "transactions",
    "share_groups",
    "group_formation",
    "consumer_protocol",
    "heartbeat_load",
    "commit_path",
    "sync_rounds",
    "offsets_replay",
    "timing_wheel",
    "member_memory",
    "fuzz",
    "storage_engines",
    "storage_memory",
    "secure_load",
    "limits",
    "metadata_flood",
    "members_scale",
    "cluster_failover",
)
"""Section modules in the order they run."""


def _load(name: str) -> ModuleType:
    if name not in SECTIONS:
        raise SystemExit(f"unknown section {name!r}; known: {', '.join(SECTIONS)}")
    return importlib.import_module(name)


def _settings(pairs: list[str]) -> dict[str, str]:
    settings: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set {pair!r}: expected NAME=VALUE")
        settings[name] = value
    return settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "sections", nargs="*", metavar="SECTION", help=f"one of: {', '.join(SECTIONS)}; or: compare [REF]"
    )
    parser.add_argument("--runs", type=int, default=3, help="repetitions per figure (median reported)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="server setting")
    modules = {name: _load(name) for name in SECTIONS}
    for module in modules.values():
        module.add_arguments(parser)
    compare.add_arguments(parser)
    options = parser.parse_args(argv)
    if options.sections[:1] == ["compare"]:
        if len(options.sections) > 2:
            raise SystemExit("compare takes one git ref at most")
        return compare.main(options.sections[1] if len(options.sections) == 2 else None, options)
    chosen = options.sections or list(SECTIONS)
    settings = _settings(options.set)
    for name in chosen:
        module = _load(name)
        print(f"== {name}: {module.DESCRIPTION}", flush=True)
        started = time.monotonic()
        with running_kcoord(settings) as server:
            measurements = module.run(server, options)
        print(format_table(name, measurements))
        print(f"({time.monotonic() - started:.1f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
