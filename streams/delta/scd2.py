"""SCD type 2: apply one micro-batch of changes to a history table, exactly once.

`write_batch` calls `apply_scd2` for `mode="scd2"` after its idempotence guard
passed. The batch is collected to the driver as Arrow (CDC batches of dimensions
are small), `plan_scd2` (`streams.delta.scd2_plan`, which states the rules) turns
each key's changes into a chain of versions, and one delta-rs MERGE closes the
current rows and inserts the new versions, in a commit that carries the batch's
app transaction.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, Schema
from deltalake.exceptions import DeltaError
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streams.delta import schema as table_schema
from streams.delta.arrow import read_table
from streams.delta.commit import (
    commit_empty,
    current_table,
    evolve_schema,
    kept_table,
    version_after_merge,
)
from streams.delta.errors import DeltaSchemaError, DeltaWriteError
from streams.delta.faults import crash_point
from streams.delta.scd2_plan import (
    ARRIVAL,
    IS_CURRENT,
    SCD2_COLUMNS,
    VALID_FROM,
    VALID_TO,
    Key,
    KeyState,
    change_time,
    plan_scd2,
    time_like,
)
from streams.delta.tables import storage_options
from streams.delta.target import (
    INTERNAL_COLUMNS,
    TABLE_CONFIGURATION,
    DeltaTarget,
    commit_properties,
)

logger = logging.getLogger(__name__)

ACTION = "__warehouse_scd2_action"
"""The MERGE source's column saying what a row does: `close` a current row or `insert`."""
_TIME = pa.timestamp("us", tz="UTC")


def load_state(
    table: DeltaTable,
    keys: Sequence[str],
    sequence_by: str,
    touched: Iterable[Key],
    *,
    time_ordered: bool,
) -> dict[Key, KeyState]:
    """Per touched key: whether it has a current row, and its latest time or sequence."""
    touched = set(touched)
    if not touched:
        return {}
    columns = [*keys, sequence_by, VALID_FROM, VALID_TO, IS_CURRENT]
    present = {f.name for f in table.schema().fields}
    missing = [c for c in columns if c not in present]
    if missing:
        raise DeltaSchemaError(
            f"Delta table `{table.table_uri}`: mode `scd2` needs the columns "
            + ", ".join(f"`{c}`" for c in missing)
            + ", which the table lacks; it was not created by an SCD2 sink. "
            "Use a new table path (or reset the table) for the SCD2 history.",
            path=table.table_uri,
            column=missing[0],
        )
    # Only the files (and row groups) whose statistics may hold a touched key are read;
    # composite keys match exactly below.
    values = {k: pa.array([key[i] for key in touched]) for i, k in enumerate(keys)}
    found = read_table(table, columns=columns, keys_in=values)
    state: dict[Key, KeyState] = {}
    for row in found.to_pylist():
        key = tuple(row[k] for k in keys)
        if key not in touched:
            continue
        s = state.setdefault(key, KeyState())
        s.has_current = s.has_current or bool(row[IS_CURRENT])
        for t in (row[VALID_FROM], row[VALID_TO]):
            if t is not None and (s.last_time is None or t > s.last_time):
                s.last_time = t
        seq = row[sequence_by]
        if seq is not None and (s.last_sequence is None or seq > s.last_sequence):
            s.last_sequence = seq
    return state


def _stored_schema(data: pa.Schema, target: DeltaTarget) -> pa.Schema:
    """The table's schema: the batch's columns (normalized, markers dropped) + SCD2 columns."""
    clash = [c for c in SCD2_COLUMNS if c in data.names]
    if clash:
        raise DeltaSchemaError(
            f"Delta table `{target.path}`: mode `scd2` adds the columns `valid_from`, "
            f"`valid_to`, `is_current`, but the batch already has `{clash[0]}`. Rename it "
            "in the query.",
            path=target.path,
            column=clash[0],
        )
    dropped = {*INTERNAL_COLUMNS, ARRIVAL}
    kept = table_schema.normalize_arrow(pa.schema([f for f in data if f.name not in dropped]))
    return pa.schema(
        [
            *kept,
            pa.field(VALID_FROM, _TIME),
            pa.field(VALID_TO, _TIME),
            pa.field(IS_CURRENT, pa.bool_()),
        ]
    )


def _check_nulls(rows: pa.Table, target: DeltaTarget, batch_id: int) -> None:
    for column in (*target.keys, target.sequence_by):
        assert column is not None
        if rows.column(column).null_count:
            what = "key column" if column in target.keys else "sequence column"
            raise DeltaWriteError(
                f"Delta table `{target.path}`: batch {batch_id} has rows whose {what} "
                f"`{column}` is null; SCD2 cannot place or order them. Filter them out or "
                "route them to quarantine with an expectation "
                "`expect_column_values_to_not_be_null`.",
                path=target.path,
                batch_id=batch_id,
            )


def _open_table(target: DeltaTarget, stored: pa.Schema) -> DeltaTable:
    with kept_table(target.path) as kept:
        table = kept.get()
    if table is None:
        table_schema.check_columns(
            stored.names, target.partition_by, path=target.path, what="partition columns"
        )
        DeltaTable.create(
            target.path,
            Schema.from_arrow(stored),
            partition_by=list(target.partition_by) or None,
            configuration=TABLE_CONFIGURATION,
            storage_options=storage_options(target.path),
        )
        return current_table(target.path)
    table_schema.check_partitioning(table, target.partition_by, path=target.path)
    existing = {f.name for f in table.schema().fields}
    lacking = [c for c in SCD2_COLUMNS if c not in existing]
    if lacking:
        raise DeltaSchemaError(
            f"Delta table `{target.path}` has no column "
            + ", ".join(f"`{c}`" for c in lacking)
            + ": it was not written by an SCD2 sink (`mode: scd2`), and its rows carry no "
            "history. Write the SCD2 table to a new path, or reset this table.",
            path=target.path,
            column=lacking[0],
        )
    return evolve_schema(table, stored, target)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _merge(table: DeltaTable, source: pa.Table, target: DeltaTarget, props: Any) -> None:
    """Close the matched current rows and insert the new versions, in one commit."""
    on = " AND ".join(
        [
            *(f"t.{_q(k)} = s.{_q(k)}" for k in target.keys),
            f"s.{_q(ACTION)} = 'close'",
            f"t.{_q(IS_CURRENT)} = true",
        ]
    )
    (
        table.merge(
            source,
            on,
            source_alias="s",
            target_alias="t",
            merge_schema=True,
            commit_properties=props,
        )
        .when_matched_update(updates={_q(VALID_TO): f"s.{_q(VALID_TO)}", _q(IS_CURRENT): "false"})
        .when_not_matched_insert_all(predicate=f"s.{_q(ACTION)} = 'insert'", except_cols=[ACTION])
        .execute()
    )


def apply_scd2(
    df: DataFrame,
    batch_id: int,
    target: DeltaTarget,
    *,
    commit_info: Mapping[str, Any] | None = None,
    now: dt.datetime | None = None,
) -> int:
    """Apply one batch of changes to the SCD2 table at `target.path`; the new version.

    The caller (`write_batch`) has checked that `batch_id` is not committed yet. `now`
    is the processing time used as `valid_from` when the sequence is not time-like and
    the rows carry neither `_source_ts_ms` nor `_timestamp` (default: the clock).
    """
    table_schema.check_columns(df.columns, target.keys, path=target.path, what="key columns")
    table_schema.check_columns(
        df.columns, [target.sequence_by or ""], path=target.path, what="sequence column"
    )
    # the table's types come from the Spark schema, exactly as for the upsert sink
    stored = table_schema.arrow_schema(df.schema)
    rows = df.withColumn(ARRIVAL, F.monotonically_increasing_id()).toArrow()
    return apply_scd2_arrow(rows, batch_id, target, commit_info=commit_info, now=now, schema=stored)


def apply_scd2_arrow(
    rows: pa.Table,
    batch_id: int,
    target: DeltaTarget,
    *,
    commit_info: Mapping[str, Any] | None = None,
    now: dt.datetime | None = None,
    schema: pa.Schema | None = None,
) -> int:
    """`apply_scd2` on a batch already on the driver as Arrow (the Spark-free core).

    `schema`: the batch's column types as the table should store them (default: the
    Arrow table's own, normalized); rows keep their order as arrival order.
    """
    with kept_table(target.path):  # the plan, the MERGE and the version after share it
        table, source, counts = plan_batch(rows, batch_id, target, now=now, schema=schema)
        if source is None:
            return commit_empty(table, batch_id, target, commit_info)
        try:
            _merge(table, source, target, commit_properties(target, batch_id, commit_info))
        except DeltaError as e:
            raise DeltaWriteError(
                f"Delta table `{target.path}`: merging SCD2 batch {batch_id} "
                f"({counts[0]} closes, {counts[1]} new versions) failed: {e}",
                path=target.path,
                batch_id=batch_id,
            ) from e
        logger.info(
            "Delta table %s: batch %d: closed %d version(s), inserted %d",
            target.name,
            batch_id,
            counts[0],
            counts[1],
        )
        return version_after_merge(target, batch_id, commit_info)


def plan_batch(
    rows: pa.Table,
    batch_id: int,
    target: DeltaTarget,
    *,
    now: dt.datetime | None = None,
    schema: pa.Schema | None = None,
) -> tuple[DeltaTable, pa.Table | None, tuple[int, int]]:
    """Open (or create) the history table and plan one batch against its current rows.

    Returns the table, the MERGE source (`ACTION` `close` rows to end, `insert` rows to
    add; None when the batch changes nothing) and the counts (versions closed, inserted).
    Both engines apply the same source: delta-rs here, delta-spark in `streams.delta.native`.
    """
    keys, seq = list(target.keys), target.sequence_by
    assert seq is not None  # DeltaTarget requires it for scd2
    table_schema.check_columns(rows.schema.names, keys, path=target.path, what="key columns")
    table_schema.check_columns(rows.schema.names, [seq], path=target.path, what="sequence column")
    stored = _stored_schema(schema if schema is not None else rows.schema, target)
    _check_nulls(rows, target, batch_id)
    seq_type = rows.schema.field(seq).type
    ordered = time_like(seq, seq_type)
    time_of = change_time(seq, seq_type, now or dt.datetime.now(dt.UTC))
    table = _open_table(target, stored)
    changes = rows.to_pylist()
    state = load_state(
        table, keys, seq, (tuple(r[k] for k in keys) for r in changes), time_ordered=ordered
    )
    data_columns = [f.name for f in stored if f.name not in SCD2_COLUMNS]
    plan = plan_scd2(
        changes,
        state,
        keys=keys,
        sequence_by=seq,
        time_of=time_of,
        time_ordered=ordered,
        stored=data_columns,
    )
    crash_point("before_commit")
    if plan.stale:
        logger.info(
            "Delta table %s: batch %d: ignored %d stale change(s) (not newer than the table)",
            target.name,
            batch_id,
            plan.stale,
        )
    closed = len(plan.closes) + sum(1 for r in plan.inserts if not r[IS_CURRENT])
    if not plan.closes and not plan.inserts:
        return table, None, (0, 0)
    source_schema = pa.schema([*stored, pa.field(ACTION, pa.string())])
    source = pa.Table.from_pylist(
        [{**r, ACTION: "close"} for r in plan.closes]
        + [{**r, ACTION: "insert"} for r in plan.inserts],
        schema=source_schema,
    )
    return table, source, (closed, len(plan.inserts))
