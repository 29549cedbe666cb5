"""The daemon's garbage-collector setting, in a fresh interpreter (it changes process state)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from kirod.daemon.collector import YOUNG_THRESHOLD

_PROBE = textwrap.dedent(
    """
    import gc, json, weakref

    import kirod.daemon.lifecycle  # what the daemon has imported when it settles
    from kirod.daemon.collector import YOUNG_THRESHOLD, settle

    default = gc.get_threshold()
    settle()
    report = {"default": default, "threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}

    class Node:
        pass

    collected = []
    cycle = Node()
    cycle.me = cycle
    weakref.finalize(cycle, collected.append, True)
    del cycle
    before = len(collected)
    keep = []
    for _ in range(YOUNG_THRESHOLD + 1000):  # tracked allocations, no explicit collect
        keep.append([])
    report["collected_before"] = before
    report["collected_after"] = len(collected)
    print(json.dumps(report))
    """
)


def _probe() -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_settle_freezes_the_loaded_objects_and_raises_only_the_young_threshold() -> None:
    report = _probe()
    default, threshold = report["default"], report["threshold"]
    assert isinstance(default, list)
    assert isinstance(threshold, list)
    assert threshold == [YOUNG_THRESHOLD, default[1], default[2]]
    frozen = report["frozen"]
    assert isinstance(frozen, int)
    assert frozen > 10_000  # the imported modules' objects


def test_cycles_are_still_collected_without_an_explicit_collect() -> None:
    report = _probe()
    assert report["collected_before"] == 0
    assert report["collected_after"] == 1
