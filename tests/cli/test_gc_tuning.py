"""``kcoord serve``'s collector thresholds: the young generation waits for 10,000 net allocations."""

from __future__ import annotations

import ast
import subprocess
import sys

from kcoord.cli.gc_tuning import SERVING_THRESHOLDS


def test_tuning_for_serving_raises_the_young_threshold_in_that_process() -> None:
    """In a fresh interpreter (the setting is process-wide) the call replaces CPython's 700 by 10,000."""
    code = (
        "import gc; before = gc.get_threshold(); "
        "from kcoord.cli.gc_tuning import tune_for_serving; tune_for_serving(); "
        "print(repr((before, gc.get_threshold())))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    before, after = ast.literal_eval(done.stdout.strip())
    assert before == (700, 10, 10)
    assert after == SERVING_THRESHOLDS == (10_000, 10, 10)


def test_full_collections_freeze_their_survivors_and_every_32nd_walks_everything() -> None:
    """After a full collection its survivors are frozen; the 32nd full collection unfreezes first."""
    code = (
        "import gc; from kcoord.cli.gc_tuning import tune_for_serving; tune_for_serving(); "
        "keep = [[i] for i in range(1000)]; gc.collect(); after_first = gc.get_freeze_count(); "
        "[gc.collect() for _ in range(30)]; before_32nd = gc.get_freeze_count(); "
        "gc.callbacks.append(lambda phase, info: phase == 'start' and seen.append(gc.get_freeze_count())); "
        "seen = []; gc.collect(); "
        "print(repr((after_first, before_32nd, seen[0])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    after_first, before_32nd, at_32nd = ast.literal_eval(done.stdout.strip())
    assert after_first >= 1000
    assert before_32nd >= after_first
    assert at_32nd == 0
