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
