"""SCD2 reads, per batch, only what the table holds of the keys the batch touches (delta-rs,
no Spark): the files whose statistics hold none of them are not opened."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from streams.delta import DeltaTarget
from streams.delta.scd2 import apply_scd2_arrow, load_state

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("updated_ms", pa.int64())])


def test_a_batch_reads_only_the_files_that_may_hold_its_keys(tmp_path: Path) -> None:
    target = DeltaTarget(
        str(tmp_path / "dim"), mode="scd2", keys=["id"], sequence_by="updated_ms", app_id="d:q"
    )
    added: list[set[str]] = []
    for b, first in enumerate((0, 100, 200)):
        before = {p.name for p in Path(target.path).glob("*.parquet")}
        rows = [
            {"id": i, "name": f"n{i}", "updated_ms": 1000 + i} for i in range(first, first + 100)
        ]
        apply_scd2_arrow(pa.Table.from_pylist(rows, SCHEMA), b, target)
        added.append({p.name for p in Path(target.path).glob("*.parquet")} - before)
    for name in added[0] | added[2]:  # the files of keys 0..99 and 200..299
        (Path(target.path) / name).unlink()
    state = load_state(
        DeltaTable(target.path), ["id"], "updated_ms", [(150,), (151,), (999,)], time_ordered=True
    )
    assert sorted(state) == [(150,), (151,)]
    assert state[(150,)].has_current
