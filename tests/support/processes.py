"""Stopping a server process a test fixture started, by its pid; whether a pid still runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path


def stop_process(proc: subprocess.Popen[bytes] | None, first: signal.Signals, grace: float) -> None:
    """Send `first` to `proc` (when it still runs), and SIGKILL if it is still there after
    `grace` seconds; return once it has exited."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, first)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)


def alive(pid: int) -> bool:
    """Whether process `pid` still runs: it exists and is not a zombie (exited, not yet
    reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
