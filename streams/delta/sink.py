"""The write modes of the python engine: one micro-batch into a Delta table, exactly
once per (app_id, batch_id).

`write_batch` (`streams.delta.engine`) calls `write_python` from
`foreachBatch(fn(batch_df, batch_id))` on the driver. The guard comes first: a batch
whose id the table's app transaction already holds is skipped. Then the sink mode:
`append` (files written by the executors, one add-files commit), `upsert` (one MERGE)
or `scd2` (`streams.delta.scd2`). Every commit (append, merge, and the empty commit
of an empty batch) carries the app transaction and the caller's commit info in the
same atomic Delta commit (`streams.delta.commit`), so the table and the record of
what it holds can never disagree.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from streams.delta import _spark_files
from streams.delta import schema as table_schema
from streams.delta.changes import (
    DELETE_FLAG,
    check_change_columns,
    delete_flag,
    flagged,
    last_change_per_key,
    order_columns,
)
from streams.delta.commit import (
    FileEntry,
    after_commit,
    already_committed,
    commit_empty,
    commit_files,
    create_table,
    current_table,
    evolve_schema,
    kept_table,
    nothing_written,
    prepare_append,
    version_after_merge,
)
from streams.delta.errors import DeltaWriteError
from streams.delta.faults import crash_point
from streams.delta.files import FILES_SCHEMA, file_writer
from streams.delta.scd2 import apply_scd2
from streams.delta.target import INTERNAL_COLUMNS, DeltaTarget, commit_properties
from streams.delta.tombstones import keep_after_tombstones, record_tombstones

logger = logging.getLogger(__name__)

_ROW_NUMBER = "__warehouse_rn"
_ARRIVAL = "__warehouse_arrival"


def write_python(
    df: DataFrame,
    batch_id: int,
    target: DeltaTarget,
    *,
    commit_info: Mapping[str, Any] | None = None,
) -> int | None:
    """`write_batch` on the python engine (delta-rs): the guard, then the sink mode. The
    table is read through the one this process keeps open (`kept_table`)."""
    with kept_table(target.path) as kept:
        table = kept.get()
        if already_committed(table, target, batch_id):
            return None
        before = None if table is None else table.version()
        if target.mode == "append":
            version = _append(df, batch_id, target, table, commit_info)
        elif target.mode == "upsert":
            version = _upsert(df, batch_id, target, table, commit_info)
        else:
            version = apply_scd2(df, batch_id, target, commit_info=commit_info)
    if version == before:  # nothing to write, and the target records no empty batch
        nothing_written(target, batch_id, version)
        return version
    after_commit(target, batch_id, version)
    return version


def _append(
    df: DataFrame,
    batch_id: int,
    target: DeltaTarget,
    table: DeltaTable | None,
    commit_info: Mapping[str, Any] | None,
) -> int:
    schema = table_schema.arrow_schema(df.schema)
    table, partition_by = prepare_append(table, schema, target)
    try:
        files = write_files(df, target.path, schema, partition_by, target.unique_columns)
    except Exception as e:  # Spark wraps executor errors in its own types
        raise DeltaWriteError(
            f"Delta table `{target.path}`: writing the files of batch {batch_id} failed: {e}. "
            "The batch was not committed; the query can be restarted.",
            path=target.path,
            batch_id=batch_id,
        ) from e
    return commit_files(files, batch_id, target, table, schema, partition_by, commit_info)


def write_files(
    df: DataFrame,
    root: str,
    schema: pa.Schema,
    partition_by: list[str],
    unique_columns: Sequence[str] = (),
) -> list[FileEntry]:
    """The batch's data files, written by the executors: `(path, size, partition values,
    stats, mtime)` each. Spark's Parquet writer when the partition types allow it (no
    rows pass through Python), else the Arrow writer of `files`."""
    if _spark_files.supports(df, partition_by):
        return _spark_files.write_files(df, root, schema, partition_by, unique_columns)
    rows = df.mapInArrow(
        file_writer(root, schema, partition_by, unique_columns), FILES_SCHEMA
    ).collect()
    return [file_entry(r) for r in rows]


def file_entry(row: Any) -> FileEntry:
    """A `FileEntry` from one row (or dict) of `files.file_writer`'s output."""
    return (
        row["path"],
        row["size"],
        json.loads(row["partition_values"]),
        row["stats"],
        row["modification_time"],
    )


def null_key_error(target: DeltaTarget, batch_id: int, key: str) -> DeltaWriteError:
    """The error of an upsert batch with a null in key column `key` (either engine): a
    MERGE would insert the row, and no later change could match it."""
    return DeltaWriteError(
        f"Delta table `{target.path}`: batch {batch_id} has rows whose key column "
        f"`{key}` is null; an upsert cannot place them. Filter them out or route them "
        "to quarantine with an expectation `expect_column_values_to_not_be_null`.",
        path=target.path,
        batch_id=batch_id,
    )


def refuse_null_keys(changes: pa.Table, target: DeltaTarget, batch_id: int) -> None:
    """Raise `null_key_error` for the first key column of `changes` with a null."""
    for k in target.keys:
        if changes.column(k).null_count:
            raise null_key_error(target, batch_id, k)


def dedupe_changes(df: DataFrame, target: DeltaTarget) -> DataFrame:
    """The last change per key of one batch, in Spark, with `_op`/`_deleted` folded into a
    delete flag (the order: `streams.delta.changes`)."""
    cols = check_change_columns(df, target)
    order = [F.col(c).desc_nulls_last() for c in order_columns(cols, target)]
    order.append(F.col(_ARRIVAL).desc())
    flag = delete_flag(cols)
    w = Window.partitionBy(*[F.col(k) for k in target.keys]).orderBy(*order)
    return (
        df.withColumn(_ARRIVAL, F.monotonically_increasing_id())
        .withColumn(_ROW_NUMBER, F.row_number().over(w))
        .filter(F.col(_ROW_NUMBER) == 1)
        .withColumn(DELETE_FLAG, flag)
        .drop(_ROW_NUMBER, _ARRIVAL, *[c for c in INTERNAL_COLUMNS if c in cols])
    )


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def merge_arrow(
    table: DeltaTable,
    data: pa.Table,
    target: DeltaTarget,
    props: Any,
) -> None:
    """MERGE deduped changes (with the delete flag column) into `table` in one commit."""
    on = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in target.keys)
    newer = "TRUE"
    if target.sequence_by:
        seq = _q(target.sequence_by)
        newer = f"(t.{seq} IS NULL OR s.{seq} >= t.{seq})"
    flag = f"s.{_q(DELETE_FLAG)}"
    (
        table.merge(
            data,
            on,
            source_alias="s",
            target_alias="t",
            merge_schema=True,
            commit_properties=props,
        )
        .when_matched_delete(predicate=f"{flag} AND {newer}")
        .when_matched_update_all(predicate=f"NOT {flag} AND {newer}", except_cols=[DELETE_FLAG])
        .when_not_matched_insert_all(predicate=f"NOT {flag}", except_cols=[DELETE_FLAG])
        .execute()
    )


def _upsert(
    df: DataFrame,
    batch_id: int,
    target: DeltaTarget,
    table: DeltaTable | None,
    commit_info: Mapping[str, Any] | None,
) -> int:
    # A batch of one change per key (an aggregate's) is collected as it is, and checked
    # on the driver: no shuffle for a window over the keys (docs/decisions/0073).
    changes = flagged(df, target) if target.one_change_per_key else dedupe_changes(df, target)
    stored = table_schema.arrow_schema(changes.schema, drop=[DELETE_FLAG])
    if table is None:
        table_schema.check_columns(
            df.columns, target.partition_by, path=target.path, what="partition columns"
        )
        create_table(target.path, stored, [], list(target.partition_by))
        table = current_table(target.path)
    else:
        table = evolve_schema(table, stored, target)
    full = pa.schema([*stored, pa.field(DELETE_FLAG, pa.bool_())])
    data = changes.toArrow()
    if target.one_change_per_key:
        data = last_change_per_key(data, target)
    data = pa.Table.from_arrays([data.column(f.name).cast(f.type) for f in full], schema=full)
    refuse_null_keys(data, target, batch_id)
    if target.sequence_by:
        deletes = data.filter(data.column(DELETE_FLAG))
        # Only the tombstones of the batch's keys are read (the scan skips other files).
        data = keep_after_tombstones(data, record_tombstones(deletes, target, touched=data), target)
    crash_point("before_commit")
    props = commit_properties(target, batch_id, commit_info)
    if data.num_rows == 0:
        return commit_empty(table, batch_id, target, commit_info)
    try:
        merge_arrow(table, data, target, props)
    except DeltaError as e:
        raise DeltaWriteError(
            f"Delta table `{target.path}`: merging batch {batch_id} "
            f"({data.num_rows} keys) failed: {e}",
            path=target.path,
            batch_id=batch_id,
        ) from e
    return version_after_merge(target, batch_id, commit_info)


__all__ = [
    "DELETE_FLAG",
    "dedupe_changes",
    "file_entry",
    "merge_arrow",
    "write_files",
    "write_python",
]
