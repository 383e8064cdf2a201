"""The test runs' scratch directories: a run removes those of runs that were killed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.scratch import PREFIX, remove_dead_runs


def _exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_scratch_of_an_exited_process_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    dead = tmp_path / f"{PREFIX}jvm-{_exited_pid()}-abc"
    live = tmp_path / f"{PREFIX}jvm-{os.getpid()}-def"
    other = tmp_path / f"{PREFIX}unnamed"  # not a run's: no pid in its name
    for path in (dead, live, other):
        (path / "blockmgr").mkdir(parents=True)
        (path / "blockmgr" / "shuffle_0.data").write_bytes(b"x" * 4096)

    assert remove_dead_runs(tmp_path) == [dead]
    assert not dead.exists()
    assert live.is_dir() and other.is_dir()
