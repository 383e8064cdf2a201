"""What a broker process imports: `python -m streams.broker` as the launcher starts it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

_RUN_AND_LIST = """
import json, runpy, sys
sys.argv = ["python -m streams.broker", "--help"]
try:
    runpy.run_module("streams.broker", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if sys.modules[m] is not None)))
"""


def test_a_broker_process_leaves_hypothesis_and_pytest_out() -> None:
    """kio registers test strategies with hypothesis whenever hypothesis is installed, and
    hypothesis imports pytest: 0.38 CPU-s of a broker process's start. The broker's main
    module marks hypothesis absent, and kio still loads."""
    assert importlib.util.find_spec("hypothesis") is not None  # installed here, as in dev
    run = subprocess.run(
        [sys.executable, "-c", _RUN_AND_LIST],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    imported = json.loads(run.stdout.splitlines()[-1])
    assert "kio.static.primitive" in imported
    assert "streams.broker.app" in imported
    assert [m for m in imported if m.split(".")[0] in ("hypothesis", "pytest")] == []
