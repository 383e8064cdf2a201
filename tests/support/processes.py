"""Stopping a server process a test fixture started, by its pid."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


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
