"""`warehouse run` in a subprocess, as a user starts it, for the end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


@contextmanager
def warehouse_run(project: Path, log_path: Path, **env: str) -> Iterator[subprocess.Popen]:
    """`python -m warehouse run --layer all` on `project` in the background, its output
    in `log_path` and `env` added to its environment; killed on the way out if it still
    runs."""
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "warehouse", "--project", str(project), "run", "--layer", "all"],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        log.close()


def stop(proc: subprocess.Popen) -> int:
    """SIGTERM the run and return its exit code (waiting up to 180 s)."""
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=180)
