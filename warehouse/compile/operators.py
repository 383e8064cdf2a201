"""The stateful operators of a table read from another table: watermark, dedupe, aggregate.

pyspark is imported inside functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warehouse.compile.errors import CompileError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from warehouse.spec.table import TableDefinition


def window_aggregate(df: DataFrame, defn: TableDefinition) -> DataFrame:
    from pyspark.sql import functions as F

    agg = defn.spec.aggregate
    assert agg is not None
    measures = [F.expr(expr).alias(name) for name, expr in agg.measures.items()]
    groups = [F.col(c) for c in agg.group_by]
    if agg.window is None:
        return df.groupBy(*groups).agg(*measures)
    w = agg.window
    win = (
        F.window(F.col(w.column), w.size, w.slide) if w.slide else F.window(F.col(w.column), w.size)
    )
    out = df.groupBy(win.alias("_window"), *groups).agg(*measures)
    return out.select(
        F.col("_window.start").alias("window_start"),
        F.col("_window.end").alias("window_end"),
        *[F.col(c) for c in agg.group_by],
        *[F.col(n) for n in agg.measures],
    )


def stateful(df: DataFrame, defn: TableDefinition, *, watermark_done: bool) -> DataFrame:
    """Watermark (when not applied before the transform), dedupe, aggregate."""
    spec = defn.spec
    if spec.watermark and not watermark_done:
        df = with_watermark(df, defn)
    if spec.dedupe:
        missing = [k for k in spec.dedupe.keys if k not in df.columns]
        if missing:
            raise CompileError(
                f"Table `{defn.name}` ({defn.path}): dedupe key(s) "
                + ", ".join(f"`{k}`" for k in missing)
                + " are not columns of the transformed stream ("
                + ", ".join(f"`{c}`" for c in df.columns)
                + "). Add them to the SELECT or change `dedupe.keys`.",
                table=defn.name,
            )
        if spec.watermark:
            df = df.dropDuplicatesWithinWatermark(list(spec.dedupe.keys))
        else:
            df = df.dropDuplicates(list(spec.dedupe.keys))
    if spec.aggregate:
        df = window_aggregate(df, defn)
    return df


def with_watermark(df: DataFrame, defn: TableDefinition) -> DataFrame:
    wm = defn.spec.watermark
    assert wm is not None
    if wm.column not in df.columns:
        raise CompileError(
            f"Table `{defn.name}` ({defn.path}): watermark column `{wm.column}` is neither a "
            "source column nor an output column of the transform ("
            + ", ".join(f"`{c}`" for c in df.columns)
            + "). Fix `watermark.column`.",
            table=defn.name,
        )
    return df.withWatermark(wm.column, wm.delay)
