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
    in `log_path` and `env` added to its environment; in a process group of its own, as
    a service manager starts it; its group killed on the way out if it still runs."""
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "warehouse", "--project", str(project), "run", "--layer", "all"],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        log.close()


def stop(proc: subprocess.Popen, *, group: bool = False) -> int:
    """SIGTERM the run and return its exit code (waiting up to 180 s). `group`: to every
    process of its group at once (its Spark JVM too), as systemd stops a service."""
    if group:
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=180)


def java_children(proc: subprocess.Popen) -> list[int]:
    """The pids of `proc`'s child processes that run Java (its local Spark's JVM)."""
    pids = []
    for task in Path(f"/proc/{proc.pid}/task").iterdir():
        children = task / "children"
        pids += [int(p) for p in children.read_text().split()] if children.exists() else []
    return [
        pid
        for pid in pids
        if Path(f"/proc/{pid}/comm").exists()
        and Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    ]
