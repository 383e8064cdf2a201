"""`streams._worker_gc.freeze_imports`, in a fresh interpreter of its own (a freeze lasts
for the process): it freezes what the process tracks once modules were imported, and
only then."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_SCRIPT = """
import gc, json
from streams._worker_gc import freeze_imports
out = {}
freeze_imports()
out["first"] = gc.get_freeze_count()
out["tracked_after_first"] = len(gc.get_objects())
kept = [[i] for i in range(1000)]  # allocated by a task: not frozen by the next call
freeze_imports()
out["again"] = gc.get_freeze_count()
import decimal, fractions, statistics  # a task of a new kind imports more
freeze_imports()
out["after_import"] = gc.get_freeze_count()
out["tracked_after_import"] = len(gc.get_objects())
print(json.dumps(out))
"""


def test_freezes_what_was_imported_and_only_when_modules_were_added() -> None:
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=REPO, capture_output=True, text=True, check=True
    )
    out = json.loads(run.stdout)
    # The interpreter's own modules and this package's: thousands of objects.
    assert out["first"] > 5000
    # Left for the collector: what was allocated since, nothing of the start-up.
    assert out["tracked_after_first"] < 200
    # No module was added: the task's own lists stay with the collector.
    assert out["again"] == out["first"]
    assert out["after_import"] > out["first"]
    assert out["tracked_after_import"] < 200
