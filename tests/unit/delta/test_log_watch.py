"""`LogWatch`: a wait for a file in a local folder ends when the file comes in, by
rename or by link as Delta writes a commit, or at its deadline with nothing; on Linux
through inotify, elsewhere (or without inotify) by looking."""

from __future__ import annotations

import os
import pickle
import sys
import threading
from pathlib import Path

import pytest

from streams.delta.log_watch import LogWatch


def _later(action, delay: float = 0.3) -> threading.Timer:
    timer = threading.Timer(delay, action)
    timer.start()
    return timer


@pytest.mark.parametrize("watched", [True, False], ids=["inotify", "looking"])
def test_a_wait_ends_when_the_file_comes_in_by_rename_or_link(tmp_path: Path, watched) -> None:
    watch = LogWatch(str(tmp_path))
    if not watched:
        watch._tried = True  # as where inotify cannot be had
    elif not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux's")
    (tmp_path / "staged").write_text("{}")
    _later(lambda: os.rename(tmp_path / "staged", tmp_path / "00000000000000000001.json"))
    assert watch.wait_for("00000000000000000001.json", 600)
    assert (watch._fd is not None) == watched

    (tmp_path / "other").write_text("{}")  # an unrelated entry first: the wait goes on
    _later(lambda: (tmp_path / "_last_checkpoint").write_text("{}"), 0.1)
    _later(lambda: os.link(tmp_path / "other", tmp_path / "00000000000000000002.json"), 0.4)
    assert watch.wait_for("00000000000000000002.json", 600)
    watch.close()


def test_a_wait_ends_at_its_deadline_with_nothing(tmp_path: Path) -> None:
    watch = LogWatch(str(tmp_path))
    assert not watch.wait_for("00000000000000000001.json", 0.2)
    (tmp_path / "00000000000000000001.json").write_text("{}")
    assert watch.wait_for("00000000000000000001.json", 0)  # there: no wait at all


def test_a_copy_watches_anew(tmp_path: Path) -> None:
    watch = LogWatch(str(tmp_path))
    watch.wait_for("x", 0.05)
    copy = pickle.loads(pickle.dumps(watch))
    assert copy._fd is None and copy.folder == str(tmp_path)
    _later(lambda: (tmp_path / "x.json").write_text("{}"))
    assert copy.wait_for("x.json", 600)
