"""The executor-side file writer, driven directly with Arrow batches (no Spark needed)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streams.delta import files
from streams.delta.files import file_writer, partition_value


def _run(root: Path, batches: list[pa.RecordBatch], partition_by: list[str]) -> list[dict]:
    schema = batches[0].schema
    out = list(file_writer(str(root), schema, partition_by)(iter(batches)))
    return pa.Table.from_batches(out).to_pylist() if out else []


def test_stats_cover_every_batch_of_a_file(tmp_path: Path) -> None:
    b1 = pa.record_batch({"x": [5, None, 3], "s": ["b", "a", None]})
    b2 = pa.record_batch({"x": [9, 1, None], "s": ["c", "c", "c"]})
    [row] = _run(tmp_path, [b1, b2], [])
    stats = json.loads(row["stats"])
    assert stats == {
        "numRecords": 6,
        "minValues": {"x": 1, "s": "a"},
        "maxValues": {"x": 9, "s": "c"},
        "nullCount": {"x": 2, "s": 1},
    }
    written = pq.read_table(tmp_path / row["path"])
    assert written.num_rows == 6 and row["size"] == (tmp_path / row["path"]).stat().st_size


def test_partitions_go_to_hive_directories_without_the_partition_column(tmp_path: Path) -> None:
    batch = pa.record_batch({"v": [1, 2, 3, 4], "d": ["x", "y y", None, "x"]})
    rows = _run(tmp_path, [batch], ["d"])
    by_value = {json.loads(r["partition_values"])["d"]: r for r in rows}
    assert set(by_value) == {"x", "y y", None}
    assert by_value["x"]["path"].startswith("d=x/")
    assert by_value["y y"]["path"].startswith("d=y%20y/")
    assert by_value[None]["path"].startswith("d=__HIVE_DEFAULT_PARTITION__/")
    x = pq.read_table(tmp_path / by_value["x"]["path"])
    assert x.column_names == ["v"] and sorted(x.column("v").to_pylist()) == [1, 4]


def test_long_strings_nan_and_nested_columns_get_no_min_max(tmp_path: Path) -> None:
    batch = pa.record_batch(
        {
            "long": ["a" * 40, "b"],
            "f": [float("nan"), 1.0],
            "st": pa.array([{"a": 1}, {"a": 2}]),
            "ok": [2, 1],
        }
    )
    [row] = _run(tmp_path, [batch], [])
    stats = json.loads(row["stats"])
    assert stats["minValues"] == {"ok": 1} and stats["maxValues"] == {"ok": 2}
    assert "st" not in stats["nullCount"] and stats["nullCount"]["long"] == 0


def test_timestamp_max_is_rounded_up_to_the_millisecond(tmp_path: Path) -> None:
    ts = [dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=dt.UTC)]
    batch = pa.record_batch({"t": pa.array(ts, pa.timestamp("us", tz="UTC"))})
    [row] = _run(tmp_path, [batch], [])
    stats = json.loads(row["stats"])
    assert stats["minValues"]["t"] == "2024-01-01T00:00:00.001Z"
    assert stats["maxValues"]["t"] == "2024-01-01T00:00:00.002Z"


def test_an_empty_task_writes_no_file(tmp_path: Path) -> None:
    schema = pa.schema([("x", pa.int64())])
    assert list(file_writer(str(tmp_path), schema, [])(iter([]))) == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, "true"),
        (7, "7"),
        (dt.date(2024, 3, 1), "2024-03-01"),
        (dt.datetime(2024, 3, 1, 12, 30, tzinfo=dt.UTC), "2024-03-01 12:30:00.000000"),
        ("a/b", "a/b"),
    ],
)
def test_partition_values_follow_the_delta_protocol(value: object, expected: str | None) -> None:
    assert partition_value(value) == expected


def test_text_leaves_get_a_dictionary_unless_their_column_is_unique(tmp_path: Path) -> None:
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    batch = pa.record_batch(
        {
            "_offset": pa.array([1, 2, 3], pa.int64()),
            "headers": pa.array([[{"key": "a", "value": b"b"}], None, []], pa.list_(header)),
            "tags": pa.array([{"k": 1}, None, {"k": 2}], pa.map_(pa.string(), pa.int64())),
            "s": ["x", "y", "x"],
            "key": pa.array([b"k", b"k", None], pa.binary()),
            "n": pa.array([7, 7, 7], pa.int64()),
            "at": pa.array([1, 1, 1], pa.timestamp("us", "UTC")),
        }
    )
    out = list(file_writer(str(tmp_path), batch.schema, [], ["_offset", "key"])(iter([batch])))
    [row] = pa.Table.from_batches(out).to_pylist()
    meta = pq.read_metadata(tmp_path / row["path"])
    chunks = {
        meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i)
        for i in range(meta.num_columns)
    }
    assert {p: c.dictionary_page_offset is not None for p, c in chunks.items()} == {
        "_offset": False,
        "headers.list.element.key": True,
        "headers.list.element.value": True,
        "tags.key_value.key": True,
        "tags.key_value.value": False,
        "s": True,
        "key": False,
        "n": False,
        "at": False,
    }
    assert {c.compression for c in chunks.values()} == {"ZSTD"}
    assert row["path"].endswith(".zstd.parquet")


def test_small_batches_are_written_as_one_row_group_and_a_full_buffer_flushes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = [pa.record_batch({"x": list(range(i * 10, i * 10 + 10))}) for i in range(30)]
    [row] = _run(tmp_path / "one", batches, [])
    meta = pq.read_metadata(tmp_path / "one" / row["path"])
    assert (meta.num_row_groups, meta.num_rows) == (1, 300)
    assert json.loads(row["stats"])["maxValues"] == {"x": 299}

    # Two partitions' files share one task's buffer: past it, both are written out.
    monkeypatch.setattr(files, "ROW_GROUP_BYTES", batches[0].nbytes * 4)
    split = [b.append_column("p", pa.array([i % 2] * 10)) for i, b in enumerate(batches)]
    rows = _run(tmp_path / "two", split, ["p"])
    groups = {r["partition_values"]: pq.read_metadata(tmp_path / "two" / r["path"]) for r in rows}
    assert {p: m.num_rows for p, m in groups.items()} == {'{"p": "0"}': 150, '{"p": "1"}': 150}
    assert {p: m.num_row_groups for p, m in groups.items()} == {'{"p": "0"}': 8, '{"p": "1"}': 8}
    written = pq.read_table(tmp_path / "two" / rows[0]["path"]).column("x").to_pylist()
    assert written == sorted(written) and len(written) == 150
