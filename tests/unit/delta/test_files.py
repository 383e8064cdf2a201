"""The executor-side file writer, driven directly with Arrow batches (no Spark needed)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
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


class _Computed(files._Stats):
    """Every bound computed from the rows, none read from the footer: the reference."""

    def add_footer(self, meta: pq.FileMetaData, read: object) -> None:
        pass


def _every_kind(n: int, *, offset: int = 0) -> pa.RecordBatch:
    """`n` rows of a column of every kind the stats treat apart; row `i` is null in a
    column where `i % 5 == column's index % 5`, so each batch holds nulls."""

    def usec(i: int) -> dt.datetime:
        return dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=7919 * i + 1)

    rows = range(offset, offset + n)
    cols = {
        "i8": pa.array([i % 200 - 100 for i in rows], pa.int8()),
        "i32": pa.array([-i for i in rows], pa.int32()),
        "i64": pa.array([i * 1_000_003 for i in rows], pa.int64()),
        "u64": pa.array([2**64 - 1 - i for i in rows], pa.uint64()),
        "f64": pa.array([(i % 7 - 3) * 0.5 for i in rows], pa.float64()),  # -0.0 and 0.0
        "f32": pa.array([i / 3 for i in rows], pa.float32()),
        "s": pa.array([f"k{i % 97:03d}é" for i in rows]),
        "s32": pa.array(["x" * (32 if i % 11 else 1) for i in rows]),
        "emoji": pa.array(["😀" * (1 + i % 30) for i in rows], pa.large_string()),
        "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in rows]),
        "d64": pa.array([dt.date(1969, 12, 1) + dt.timedelta(days=i) for i in rows], pa.date64()),
        "ts": pa.array([usec(i) for i in rows], pa.timestamp("us", "UTC")),
        "ts_naive": pa.array([usec(i).replace(tzinfo=None) for i in rows], pa.timestamp("us")),
        "ts_ms": pa.array([usec(i) for i in rows], pa.timestamp("ms", "Asia/Tokyo")),
        "ts_s": pa.array([usec(i * 1000) for i in rows], pa.timestamp("s", "UTC")),
        "ts_ns": pa.array([i * 1_000_001 for i in rows], pa.timestamp("ns", "UTC")),
        "dec": pa.array([Decimal(i) / 100 for i in rows], pa.decimal128(12, 2)),
        "ok": pa.array([i % 3 == 0 for i in rows]),
        "raw": pa.array([bytes([i % 256]) for i in rows], pa.binary()),
        "st": pa.array([{"a": i, "b": str(i)} for i in rows]),
        "ls": pa.array([[i, i + 1] for i in rows]),
        "nothing": pa.array([None] * n, pa.string()),
    }
    return pa.record_batch(
        {
            name: pc.if_else(pa.array([i % 5 == k % 5 for i in rows]), pa.nulls(n, a.type), a)
            for k, (name, a) in enumerate(cols.items())
        }
    )


def _stats_both_ways(root: Path, batches: list[pa.RecordBatch], monkeypatch) -> tuple[str, str]:
    """The stats JSON of the one file `file_writer` writes from `batches`, with the footer's
    bounds and with every bound computed from the rows."""
    [footer] = _run(root / "footer", batches, [])
    monkeypatch.setattr(files, "_FooterStats", _Computed)
    [computed] = _run(root / "computed", batches, [])
    monkeypatch.undo()
    return footer["stats"], computed["stats"]


@pytest.mark.parametrize(
    "shape",
    ["one batch", "batches, one row group", "a row group per batch", "row groups in a batch"],
)
def test_stats_from_the_footer_are_byte_for_byte_the_computed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    batches = [_every_kind(400, offset=400 * i) for i in range(6)]
    # Kinds that differ between batches: NaN in one batch only; a string column null in
    # the first batch (it comes later in `minValues`); strings too long for the footer's
    # statistics (a bound of its batch or not), and one just short enough (4096 bytes).
    nan = pa.array([float("nan")] + [1.0] * 399)
    batches[3] = batches[3].set_column(5, "f32", nan.cast(pa.float32()))
    batches[0] = batches[0].set_column(6, "s", pa.nulls(400, pa.string()))
    too_long = files.WRITER_STATS_MAX + 1
    batches[5] = batches[5].set_column(6, "s", pa.array(["z" * too_long] * 400))
    inner = pa.array(["b"] * 100 + ["c" * too_long] + ["b"] * 298 + ["d"])
    batches[4] = batches[4].set_column(7, "s32", inner)
    emoji = pa.array(["😀" * 1024] * 400, pa.large_string())
    batches[2] = batches[2].set_column(8, "emoji", emoji)
    if shape == "one batch":
        batches = pa.Table.from_batches(batches).combine_chunks().to_batches()
    elif shape == "a row group per batch":
        monkeypatch.setattr(files, "ROW_GROUP_BYTES", 1)
    elif shape == "row groups in a batch":
        monkeypatch.setattr(files, "ROW_GROUP_ROWS", 150)
    footer, computed = _stats_both_ways(tmp_path, batches, monkeypatch)
    assert footer == computed
    stats = json.loads(footer)
    assert stats["numRecords"] == 2400 and stats["nullCount"]["nothing"] == 2400
    assert {"f32", "st", "ls", "nothing", "dec", "ok", "raw"}.isdisjoint(stats["minValues"])
    assert stats["maxValues"]["ts"] == "2024-01-01T00:00:18.998Z"  # 18.997682, up
    assert stats["minValues"]["u64"] == 2**64 - 2400
    assert (stats["minValues"]["s32"], stats["maxValues"]["s32"]) == ("b", "x" * 32)
    assert {"s", "emoji"}.isdisjoint(stats["minValues"])


def test_an_empty_file_and_all_null_tables_have_no_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = _every_kind(0)
    footer, computed = _stats_both_ways(tmp_path / "empty", [empty], monkeypatch)
    assert footer == computed
    assert json.loads(footer)["minValues"] == {} and json.loads(footer)["numRecords"] == 0
    nulls = pa.record_batch({"n": pa.nulls(3, pa.int64()), "s": pa.nulls(3, pa.string())})
    values = pa.record_batch({"n": pa.array([2, None, 1]), "s": pa.array([None, "b", "a"])})
    monkeypatch.setattr(files, "ROW_GROUP_BYTES", 1)
    footer, computed = _stats_both_ways(tmp_path / "nulls", [nulls, values, nulls], monkeypatch)
    assert footer == computed
    assert json.loads(footer)["minValues"] == {"n": 1, "s": "a"}


def test_a_row_group_without_bounds_is_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table written as two row groups, the first with a value too long for its
    statistics that is neither the table's min nor its max: the table's bounds stand."""
    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 3)
    batch = pa.record_batch({"s": ["b", "c" * (files.WRITER_STATS_MAX + 1), "b", "d"]})
    [row] = _run(tmp_path, [batch], [])
    meta = pq.read_metadata(tmp_path / row["path"])
    assert meta.num_row_groups == 2 and not meta.row_group(0).column(0).statistics.has_min_max
    stats = json.loads(row["stats"])
    assert (stats["minValues"], stats["maxValues"]) == ({"s": "b"}, {"s": "d"})


def test_footer_columns_take_their_bounds_from_the_footer(tmp_path: Path) -> None:
    """Integers, dates, timestamps and strings from the footer; floats from the rows."""
    rows = pa.table({"n": [1, 2], "s": ["a", "b"], "f": [0.5, 1.5], "d": [dt.date(2024, 1, 1)] * 2})
    other = pa.table(
        {"n": [7, 9], "s": ["x", "y"], "f": [5.0, 6.0], "d": [dt.date(2025, 1, 1)] * 2}
    )
    pq.write_table(other, tmp_path / "other.parquet")
    stats = files._FooterStats(rows.schema)
    stats.update(rows)
    stats.add_footer(pq.read_metadata(tmp_path / "other.parquet"), lambda groups, name: None)
    assert json.loads(stats.to_json()) == {
        "numRecords": 2,
        "minValues": {"n": 7, "s": "x", "f": 0.5, "d": "2025-01-01"},
        "maxValues": {"n": 9, "s": "y", "f": 1.5, "d": "2025-01-01"},
        "nullCount": {"n": 0, "s": 0, "f": 0, "d": 0},
    }
