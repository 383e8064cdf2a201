"""An upsert batch's changes: the delete flag, and the last change per key.

A batch may hold several changes of one key; the one that wins is the last in this
order: `sequence_by` (when set), then the Kafka `_offset` (when present), then arrival
within the batch, nulls first (a change with a known sequence wins over one without).
`streams.delta.sink.dedupe_changes` applies it in Spark (a window over the keys: a
shuffle); `last_change_per_key` applies the same order to a batch collected on the
driver, where a small batch costs a fraction of that (docs/decisions/0073).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from streams.delta.target import DeltaTarget

DELETE_FLAG = "__warehouse_delete"
"""The column of a batch's changes that says the change deletes its key."""

_ARRIVAL = "__warehouse_arrival"
_POSITION = "__warehouse_position"


def delete_flag(columns: Sequence[str]) -> Column:
    """True for a change that deletes its key: `_op` is `d`, or `_deleted` is true."""
    from pyspark.sql import functions as F

    flag = F.lit(False)
    if "_op" in columns:
        flag = flag | F.coalesce(F.col("_op") == F.lit("d"), F.lit(False))
    if "_deleted" in columns:
        flag = flag | F.coalesce(F.col("_deleted").cast("boolean"), F.lit(False))
    return flag


def order_columns(columns: Sequence[str], target: DeltaTarget) -> list[str]:
    """The columns a key's changes are ordered by, before arrival, the later first."""
    order = [target.sequence_by] if target.sequence_by else []
    if "_offset" in columns:
        order.append("_offset")
    return order


def last_change_per_key(changes: pa.Table, target: DeltaTarget) -> pa.Table:
    """The last change of each key of `changes` (a batch collected in arrival order), in
    the order of the module's docstring; `changes` itself when no key repeats."""
    keys = list(target.keys)
    n = changes.num_rows
    if n < 2 or changes.select(keys).group_by(keys).aggregate([]).num_rows == n:
        return changes
    arrival = changes.append_column(_ARRIVAL, pa.array(range(n), pa.int64()))
    later_first = [
        *((k, "ascending", "at_end") for k in keys),
        *((c, "descending", "at_end") for c in order_columns(changes.column_names, target)),
        (_ARRIVAL, "descending", "at_end"),
    ]
    ordered = arrival.take(pc.sort_indices(arrival, sort_keys=later_first))
    ordered = ordered.append_column(_POSITION, pa.array(range(n), pa.int64()))
    first = ordered.group_by(keys).aggregate([(_POSITION, "min")]).column(f"{_POSITION}_min")
    return ordered.take(first).drop_columns([_ARRIVAL, _POSITION])


def check_change_columns(df: DataFrame, target: DeltaTarget) -> list[str]:
    """`df`'s columns, refused when a key or the sequence column is not among them."""
    from streams.delta import schema as table_schema

    cols = df.columns
    table_schema.check_columns(cols, target.keys, path=target.path, what="key columns")
    if target.sequence_by:
        table_schema.check_columns(
            cols, [target.sequence_by], path=target.path, what="sequence column"
        )
    return cols


def flagged(df: DataFrame, target: DeltaTarget) -> DataFrame:
    """`df`'s changes, not deduped: with the delete flag, without `_op`/`_deleted`."""
    from streams.delta.target import INTERNAL_COLUMNS

    columns = check_change_columns(df, target)
    return df.withColumn(DELETE_FLAG, delete_flag(columns)).drop(
        *[c for c in INTERNAL_COLUMNS if c in columns]
    )
