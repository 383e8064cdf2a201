"""Scratch directories of a test run outside pytest's own (the test JVMs' `java.io.tmpdir`,
the S3 server's folder), named after the pytest process that made them.

A run removes its own when it ends (`pytest_unconfigure`), but a run that is killed does
not, and a JVM's scratch reaches a gigabyte over a run; so each run, when it starts, also
removes the ones whose process is gone.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from tests.support.processes import alive

__all__ = ["make_scratch", "remove_dead_runs"]

PREFIX = "warehouse-tests-"
_NAME = re.compile(rf"^{PREFIX}[a-z0-9]+-(\d+)-")


def make_scratch(kind: str) -> Path:
    """A new directory `<tmp>/warehouse-tests-<kind>-<pid>-<random>` of this process."""
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-{os.getpid()}-"))


def remove_dead_runs(root: Path | None = None) -> list[Path]:
    """Remove the scratch directories under `root` (the temporary directory) whose
    process has exited; returns them."""
    root = Path(tempfile.gettempdir()) if root is None else root
    removed = []
    for path in root.glob(f"{PREFIX}*"):
        match = _NAME.match(path.name)
        if match is None or not path.is_dir() or alive(int(match.group(1))):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
