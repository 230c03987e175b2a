"""``kcoord serve``'s collector tuning: the young generation waits for 10,000 net allocations, the
survivors of the older generations are frozen, and the whole heap is walked now and then."""

from __future__ import annotations

import ast
import subprocess
import sys

from kcoord.cli.gc_tuning import SERVING_THRESHOLDS


def test_tuning_for_serving_raises_the_young_threshold_in_that_process() -> None:
    """In a fresh interpreter (the setting is process-wide) the call replaces CPython's 700 by 10,000 and
    its middle-generation 10 by 3."""
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
    assert after == SERVING_THRESHOLDS == (10_000, 3, 10)


def _run(code: str) -> tuple[object, ...]:
    """``code`` run in a fresh interpreter (the tuning is process-wide); what it printed, evaluated."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    result = ast.literal_eval(done.stdout.strip())
    assert isinstance(result, tuple)
    return result


def test_middle_generation_survivors_are_frozen_so_a_full_collection_walks_only_newer_objects() -> None:
    """After a middle-generation collection its survivors are frozen and the old generation is empty; a
    full collection then walks only what was allocated since."""
    frozen, old_generation, walked = _run(
        "import gc; from kcoord.cli.gc_tuning import tune_for_serving; tune_for_serving(); "
        "keep = [[i] for i in range(1000)]; gc.collect(1); "
        "frozen, old = gc.get_freeze_count(), len(gc.get_objects(2)); "
        "newer = [[i] for i in range(10)]; seen = []; "
        "gc.callbacks.insert(0, lambda phase, info: phase == 'start' and seen.append(len(gc.get_objects())));"
        " "
        "gc.collect(); print(repr((frozen, old, seen[0])))"
    )
    assert isinstance(frozen, int) and frozen >= 1000
    assert old_generation == 0
    assert isinstance(walked, int) and walked < 100


def test_the_whole_heap_is_walked_once_the_count_and_the_interval_have_passed() -> None:
    """With the interval passed, the 32nd full collection unfreezes first (it walks everything) and the
    count starts again; with the default 300 s interval not passed, 40 full collections never do."""
    at_32nd, walks, after = _run(
        "import gc; from kcoord.cli import gc_tuning; gc_tuning.WHOLE_HEAP_INTERVAL_S = 0.0; "
        "gc_tuning.tune_for_serving(); keep = [[i] for i in range(1000)]; "
        "[gc.collect() for _ in range(31)]; seen = []; "
        "gc.callbacks.append(lambda phase, info: phase == 'start' and seen.append(gc.get_freeze_count())); "
        "gc.collect(); tuning = gc.callbacks[0]; "
        "print(repr((seen[0], tuning.whole_heap_walks, tuning.full_collections)))"
    )
    assert (at_32nd, walks, after) == (0, 1, 1)
    (walks,) = _run(
        "import gc; from kcoord.cli import gc_tuning; gc_tuning.tune_for_serving(); "
        "[gc.collect() for _ in range(40)]; print(repr((gc.callbacks[0].whole_heap_walks,)))"
    )
    assert walks == 0
