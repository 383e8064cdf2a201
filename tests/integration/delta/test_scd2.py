"""SCD2 on real Delta tables through the Spark-free core (`apply_scd2_arrow`), and the
same batches through the native engine (a delta-spark MERGE of the same plan).

What the Spark path shares with it and is cheaper to check here: composite keys,
stale-only batches, schema evolution, partitioning, errors.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from streams.delta import (
    DeltaSchemaError,
    DeltaTarget,
    DeltaWriteError,
    read_table,
    write_batch,
)
from streams.delta.scd2 import apply_scd2_arrow
from streams.delta.tables import open_table

UTC = dt.UTC


def at(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)


def target(folder: Path | str, **kw) -> DeltaTarget:
    kw.setdefault("keys", ["tenant", "id"])
    return DeltaTarget(f"{folder}/dim", mode="scd2", sequence_by="ts_ms", app_id="dim:q", **kw)


def batch(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows)


@pytest.fixture
def apply(request: pytest.FixtureRequest, engine: str):
    """`apply(rows, batch_id, target)` on the engine of this run: the Spark-free core for
    `python`, `write_batch` of a Spark DataFrame of the same rows for `native`."""
    if engine == "python":
        return apply_scd2_arrow
    spark = request.getfixturevalue("spark")

    def native(rows: pa.Table, batch_id: int, t: DeltaTarget) -> int | None:
        native_target = DeltaTarget(
            t.path,
            mode="scd2",
            keys=t.keys,
            sequence_by=t.sequence_by,
            partition_by=t.partition_by,
            app_id=t.app_id,
            engine="native",
        )
        return write_batch(spark.createDataFrame(rows), batch_id, native_target)

    return native


def rows_of(path: str, columns: list[str]) -> list[tuple]:
    data = read_table(path, columns=columns).to_pylist()
    return sorted((tuple(r[c] for c in columns) for r in data), key=repr)


def test_composite_keys_close_only_their_own_versions(where: str, apply) -> None:
    t = target(where)
    apply(
        batch(
            [
                {"tenant": "a", "id": 1, "v": "a1", "ts_ms": 100, "_op": "c"},
                {"tenant": "b", "id": 1, "v": "b1", "ts_ms": 100, "_op": "c"},
            ]
        ),
        0,
        t,
    )
    apply(batch([{"tenant": "b", "id": 1, "v": "b2", "ts_ms": 200, "_op": "u"}]), 1, t)
    cols = ["tenant", "id", "v", "valid_from", "valid_to", "is_current"]
    assert rows_of(t.path, cols) == sorted(
        [
            ("a", 1, "a1", at(100), None, True),
            ("b", 1, "b1", at(100), at(200), False),
            ("b", 1, "b2", at(200), None, True),
        ],
        key=repr,
    )
    assert open_table(t.path).transaction_version("dim:q") == 1
    assert "_op" not in open_table(t.path).schema().to_arrow().names


def test_a_stale_only_batch_commits_its_transaction_and_changes_nothing(
    tmp_path: Path, apply
) -> None:
    t = target(tmp_path)
    apply(batch([{"tenant": "a", "id": 1, "v": "new", "ts_ms": 500}]), 0, t)
    before = rows_of(t.path, ["tenant", "id", "v", "valid_from", "valid_to", "is_current"])
    version = DeltaTable(t.path).version()
    new = apply(batch([{"tenant": "a", "id": 1, "v": "old", "ts_ms": 400}]), 1, t)
    assert new == version + 1
    assert DeltaTable(t.path).transaction_version("dim:q") == 1
    assert rows_of(t.path, ["tenant", "id", "v", "valid_from", "valid_to", "is_current"]) == before


def test_new_columns_are_added_and_partitioning_is_kept(tmp_path: Path, apply) -> None:
    t = target(tmp_path, partition_by=["tenant"])
    apply(batch([{"tenant": "a", "id": 1, "ts_ms": 100}]), 0, t)
    apply(batch([{"tenant": "a", "id": 1, "ts_ms": 200, "email": "x@y"}]), 1, t)
    table = DeltaTable(t.path)
    assert list(table.metadata().partition_columns) == ["tenant"]
    assert rows_of(t.path, ["id", "email", "is_current"]) == sorted(
        [(1, None, False), (1, "x@y", True)], key=repr
    )


def test_null_keys_and_clashing_columns_fail_with_the_column_named(tmp_path: Path) -> None:
    t = target(tmp_path)
    with pytest.raises(DeltaWriteError, match="`id` is null"):
        apply_scd2_arrow(batch([{"tenant": "a", "id": None, "ts_ms": 1}]), 0, t)
    with pytest.raises(DeltaSchemaError, match="`is_current`"):
        apply_scd2_arrow(batch([{"tenant": "a", "id": 1, "ts_ms": 1, "is_current": True}]), 0, t)
    with pytest.raises(DeltaSchemaError, match="sequence column `ts_ms`"):
        apply_scd2_arrow(batch([{"tenant": "a", "id": 1}]), 0, t)


def test_a_table_not_written_by_an_scd2_sink_is_refused(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    t = target(tmp_path)
    write_deltalake(t.path, batch([{"tenant": "a", "id": 1, "ts_ms": 1}]))
    with pytest.raises(DeltaSchemaError, match="not written by an SCD2 sink"):
        apply_scd2_arrow(batch([{"tenant": "a", "id": 1, "ts_ms": 2}]), 0, t)
    assert "is_current" not in DeltaTable(t.path).schema().to_arrow().names
