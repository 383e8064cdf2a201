"""`LogWatch`: a wait for a file in a local folder ends when the file comes in, by
rename or by link as Delta writes a commit, or at its deadline with nothing; on Linux
through inotify, elsewhere (or without inotify) by looking."""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time
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


@pytest.mark.parametrize("watched", [True, False], ids=["inotify", "looking"])
def test_the_wake_file_ends_a_wait_with_nothing(tmp_path: Path, watched) -> None:
    """A stop creates the wake file (another folder): the wait ends then, with nothing,
    and every later wait ends at once while the file is there."""
    log, wakes = tmp_path / "_delta_log", tmp_path / "wakes"
    log.mkdir()
    wakes.mkdir()
    watch = LogWatch(str(log), wake=str(wakes / "dwd_orders-1"))
    if not watched:
        watch._tried = True
    elif not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux's")
    (wakes / "dwd_orders-2").write_text("")  # another query's wake: this wait goes on
    _later(lambda: (wakes / "dwd_orders-1").write_text(""))
    ended: list[bool] = []
    waiter = threading.Thread(target=lambda: ended.append(watch.wait_for("x.json", 600)))
    waiter.start()
    waiter.join(timeout=60)  # a wait the wake did not end would take 600 s
    assert ended == [False] and watch.woken()
    assert not watch.wait_for("x.json", 600)
    (log / "x.json").write_text("{}")
    assert watch.wait_for("x.json", 600)  # what came is still answered
    copy = pickle.loads(pickle.dumps(watch))
    assert copy.wake == watch.wake and copy.woken()


def test_a_wake_folder_missing_on_this_host_leaves_the_deadline(tmp_path: Path) -> None:
    """A wake file whose folder is not on this host (a Connect client's) cannot end the
    wait: it ends at its deadline, as without one."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux's")
    watch = LogWatch(str(tmp_path), wake=str(tmp_path / "elsewhere" / "t-1"))
    assert not watch.wait_for("x.json", 0.2)
    assert watch.wake is None


def test_a_local_folder_is_not_remote(tmp_path: Path) -> None:
    """The waits on a local folder are not cut to `UNSEEN_WAIT` (that is for NFS, SMB,
    FUSE and the like, whose other hosts' writes inotify does not report)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("statfs(2) is read on Linux")
    import ctypes

    from streams.delta.log_watch import remote_folder

    libc = ctypes.CDLL(None, use_errno=True)
    assert not remote_folder(libc, str(tmp_path))
    watch = LogWatch(str(tmp_path))
    assert not watch.wait_for("x", 0.01) and not watch._remote


def test_a_wait_ends_when_the_parent_exits(tmp_path: Path) -> None:
    """A source's runner whose JVM was killed has no one to answer: its wait ends when
    its parent exits, not at the wait's deadline."""
    if not sys.platform.startswith("linux"):
        pytest.skip("pidfd is Linux's")
    import subprocess

    out = tmp_path / "out"
    child = (
        "from streams.delta.log_watch import LogWatch; "
        f"w = LogWatch({str(tmp_path)!r}); w._watch(); print('watching', flush=True); "
        "print(w.wait_for('x.json', 600), flush=True)"
    )
    # The shell starts the child and exits once it watches: the child's parent is gone.
    script = f'"$0" -c "$1" > {out} 2>&1 & until grep -q watching {out}; do sleep 0.05; done'
    subprocess.run(
        ["bash", "-c", script, sys.executable, child],
        check=True,
        cwd=Path(__file__).resolve().parents[3],
        timeout=120,
    )
    deadline = time.monotonic() + 60  # a wait the exit did not end would take 600 s
    while time.monotonic() < deadline and len(out.read_text().split()) < 2:
        time.sleep(0.1)
    assert out.read_text().split() == ["watching", "False"]


def test_a_wait_ends_when_another_folder_has_a_new_entry(tmp_path: Path) -> None:
    """A query that joins other tables' streams waits for any of their logs: an entry in
    another folder ends the wait with nothing, and so does the next wait (the other
    source may have been asked before the entry came); then waits go on as before."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux's")
    own, other = tmp_path / "own", tmp_path / "other"
    own.mkdir()
    other.mkdir()
    watch = LogWatch(str(own), others=[str(other)])
    assert not watch.wait_for("00000000000000000001.json", 0.1)  # nothing anywhere

    _later(lambda: (other / "00000000000000000005.json").write_text("{}"))
    ended: list[bool] = []
    waiter = threading.Thread(
        target=lambda: ended.append(watch.wait_for("00000000000000000001.json", 600))
    )
    waiter.start()
    waiter.join(timeout=60)  # a wait the other folder did not end would take 600 s
    assert ended == [False]
    assert not watch.wait_for("00000000000000000001.json", 600)  # the next one: at once
    assert not watch.wait_for("00000000000000000001.json", 0.1)  # then a wait again

    (other / "00000000000000000006.json").write_text("{}")  # between two waits
    assert not watch.wait_for("00000000000000000001.json", 600)  # pending: at once
    assert not watch.wait_for("00000000000000000001.json", 600)
    (own / "00000000000000000001.json").write_text("{}")
    assert watch.wait_for("00000000000000000001.json", 600)  # its own commit is answered


def test_no_wait_where_another_folder_cannot_be_watched(tmp_path: Path) -> None:
    """Without inotify (or with another folder on a network file system) another
    table's commits cannot end a wait, so a joined query's source does not wait."""
    watch = LogWatch(str(tmp_path), others=[str(tmp_path / "other")])
    watch._tried = True  # as where inotify cannot be had
    done: list[bool] = []
    waiter = threading.Thread(target=lambda: done.append(watch.wait_for("x.json", 600)))
    waiter.start()
    waiter.join(timeout=60)
    assert done == [False]
