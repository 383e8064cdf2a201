"""`KeptTable`: a delta-rs table kept open between a writer's calls; `kept_table`: the
process's pool of them."""

from __future__ import annotations

import json
import pickle
import shutil
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from streams.delta import commit
from streams.delta.arrow import read_table
from streams.delta.commit import KeptTable, append_files, kept_table
from streams.delta.target import DeltaTarget


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
    assert read_table(new).column("n").to_pylist() == [9]
    shutil.rmtree(path)
    assert kept.get() is None


def test_forget_opens_the_table_again(tmp_path):
    path = tmp_path / "t"
    _append(path, 0)
    kept = KeptTable(str(path))
    first = kept.get()
    kept.forget()
    assert kept.get() is not first


def _in_another_thread(fn):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def test_the_pool_keeps_a_table_between_blocks_and_never_shares_one(tmp_path):
    path = str(tmp_path / "t")
    _append(path, 0)

    def other_writer():  # another thread's writer of the same path
        with kept_table(path) as other:
            _append(path, 1)
            return other, other.version()

    with kept_table(path) as kept:
        table = kept.get()
        other, version = _in_another_thread(other_writer)
        assert other is not kept and version == 1
        assert kept.version() == 1 and kept.get() is table
    with kept_table(path) as again:
        assert again is kept  # the newer returned
        assert again.get() is table
        _append(path, 2)
        assert again.version() == 2


def test_a_thread_inside_a_block_gets_the_same_table(tmp_path):
    path = str(tmp_path / "t")
    _append(path, 0)
    with kept_table(path) as kept:
        table = kept.get()
        with kept_table(path) as inner:  # a step of the same write
            assert inner is kept
        with kept_table(path) as inner:  # the inner block gave nothing back to the pool
            assert inner is kept
    with pytest.raises(RuntimeError), kept_table(path) as outer:
        assert outer is kept
        with kept_table(path):
            raise RuntimeError("a step failed")
    with kept_table(path) as after:
        assert after.get() is not table  # opened again


def test_append_files_reads_its_table_through_the_pool(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    target = DeltaTarget(path=str(root), app_id="app")
    schema = pa.schema([pa.field("n", pa.int64())])

    def write_one(n: int):
        def write(partition_by):
            assert partition_by == []
            name = f"part-{n}.parquet"
            pq.write_table(pa.table({"n": [n]}, schema=schema), root / name)
            st = (root / name).stat()
            return [(name, st.st_size, {}, json.dumps({"numRecords": 1}), st.st_mtime_ns // 10**6)]

        return write

    assert append_files(target, 0, schema, write_one(0)) == 0
    with kept_table(str(root)) as kept:
        table = kept.get()
    assert [append_files(target, b, schema, write_one(b)) for b in (1, 2)] == [1, 2]
    assert table.version() >= 1  # brought up to date by the writer's own reads
    assert append_files(target, 1, schema, write_one(9)) is None  # a replay: skipped
    with kept_table(str(root)) as kept:
        assert kept.get() is table and table.version() == 2
    assert sorted(read_table(str(root)).column("n").to_pylist()) == [0, 1, 2]


def test_a_failed_block_opens_the_table_again(tmp_path):
    path = str(tmp_path / "t")
    _append(path, 0)
    with kept_table(path) as kept:
        table = kept.get()
    with pytest.raises(RuntimeError), kept_table(path) as failing:
        assert failing.get() is table
        raise RuntimeError("the write failed")
    with kept_table(path) as after:
        assert after is failing
        assert after.get() is not table and after.version() == 0


def test_the_pool_closes_the_least_recently_used(tmp_path, monkeypatch):
    monkeypatch.setattr(commit, "KEPT_TABLES", 2)
    monkeypatch.setattr(commit, "_kept", {})
    paths = [str(tmp_path / name) for name in "abc"]
    first = {}
    for path in paths[:2]:
        with kept_table(path) as kept:
            first[path] = kept
    with kept_table(paths[0]) as kept:  # used again: now the most recent
        assert kept is first[paths[0]]
    with kept_table(paths[2]):
        pass
    with kept_table(paths[0]) as kept:
        assert kept is first[paths[0]]
    with kept_table(paths[1]) as kept:
        assert kept is not first[paths[1]]  # closed when the third came


def test_a_pickled_copy_opens_the_table_where_it_lands(tmp_path):
    path = tmp_path / "t"
    _append(path, 0)
    kept = KeptTable(str(path))
    assert kept.version() == 0
    copy = pickle.loads(pickle.dumps(kept))  # a stream reader sent to an executor
    _append(path, 1)
    assert copy.version() == 1 and copy.get() is not kept.get()


def test_version_counts_new_commit_files_and_get_reads_them(tmp_path):
    path = tmp_path / "t"
    _append(path, 0)
    kept = KeptTable(str(path))
    table = kept.get()
    assert kept.get() is table and table.version() == 0  # nothing new: nothing read
    _append(path, 1)
    _append(path, 2)
    assert kept.version() == 2
    assert table.version() == 0  # counted, not read yet
    assert kept.get() is table and table.version() == 2
    assert sorted(read_table(table).column("n").to_pylist()) == [0, 1, 2]
