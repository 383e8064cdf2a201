"""`read_table`: a Delta table into Arrow, and a process that did so exits cleanly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from streams.delta.arrow import _local_root, read_table


def _table(path: Path) -> None:
    for i in range(3):
        write_deltalake(str(path), pa.table({"a": [i, i + 10], "b": ["x", "y"]}), mode="append")


def test_rows_columns_and_a_loaded_version(tmp_path: Path) -> None:
    _table(tmp_path / "t")
    assert sorted(read_table(tmp_path / "t").column("a").to_pylist()) == [0, 1, 2, 10, 11, 12]
    assert read_table(str(tmp_path / "t"), columns=["b"]).column_names == ["b"]
    old = DeltaTable(str(tmp_path / "t"), version=0)
    assert sorted(read_table(old).column("a").to_pylist()) == [0, 10]


def test_partition_values_with_special_characters(tmp_path: Path) -> None:
    data = pa.table({"id": [1, 2, 3], "city": ["São Paulo/Centro", "a=b%c d", None]})
    write_deltalake(str(tmp_path / "t"), data, partition_by=["city"])
    got = sorted(read_table(tmp_path / "t").to_pylist(), key=lambda r: r["id"])
    assert got == sorted(data.to_pylist(), key=lambda r: r["id"])


def test_local_roots() -> None:
    assert _local_root("file:///tmp/a%20b/t/") == "/tmp/a b/t"
    assert _local_root("/tmp/t") == "/tmp/t"
    assert _local_root("s3://bucket/t") is None


def test_a_process_that_read_a_table_exits_cleanly(tmp_path: Path) -> None:
    """`DeltaTable.to_pyarrow_table()` made 20 of 60 such processes abort at exit
    (`terminate called without an active exception`, see the module doc)."""
    _table(tmp_path / "t")
    script = (
        "import sys\nfrom streams.delta.arrow import read_table\n"
        "print(read_table(sys.argv[1]).num_rows)\n"
    )
    root = Path(__file__).resolve().parents[3]
    codes = []
    for _ in range(12):
        run = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "t")],
            capture_output=True,
            text=True,
            cwd=root,
        )
        codes.append((run.returncode, run.stdout.strip(), run.stderr[-300:]))
    assert all(c[:2] == (0, "6") for c in codes), codes
