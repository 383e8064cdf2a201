"""`KeptTable`: a delta-rs table kept open between a writer's calls."""

from __future__ import annotations

import shutil

import pyarrow as pa
from deltalake import write_deltalake

from streams.delta.commit import KeptTable


def _append(path, n: int) -> None:
    write_deltalake(str(path), pa.table({"n": [n]}), mode="append")


def test_a_kept_table_follows_the_commits_of_other_writers(tmp_path):
    path = tmp_path / "t"
    kept = KeptTable(str(path))
    assert kept.get() is None  # no table yet
    _append(path, 0)
    first = kept.get()
    assert first is not None and first.version() == 0
    _append(path, 1)
    _append(path, 2)
    again = kept.get()
    assert again is first  # the same table, read up to the new commits
    assert again.version() == 2


def test_a_replaced_table_is_opened_again(tmp_path):
    path = tmp_path / "t"
    kept = KeptTable(str(path))
    for n in range(3):
        _append(path, n)
    old = kept.get()
    assert old.version() == 2
    shutil.rmtree(path)
    _append(path, 9)
    new = kept.get()
    assert new is not old
    assert new.version() == 0
    assert new.to_pyarrow_table().column("n").to_pylist() == [9]
    shutil.rmtree(path)
    assert kept.get() is None


def test_forget_opens_the_table_again(tmp_path):
    path = tmp_path / "t"
    _append(path, 0)
    kept = KeptTable(str(path))
    first = kept.get()
    kept.forget()
    assert kept.get() is not first
