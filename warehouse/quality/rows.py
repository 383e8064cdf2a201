"""Row-level expectations enforced inside the stream (one `foreachBatch` call at a time).

Each row-level expectation compiles to a Spark predicate. Like great-expectations,
a null is not a violation except for `expect_column_values_to_not_be_null`, and
rows where the column is null are not counted as checked. `mostly` is judged
per batch: with `warn` it decides the metric's `success`, with `fail` the batch
fails only when its pass fraction is below `mostly`; `drop` and `quarantine`
remove every failing row whatever `mostly` says.

A row that fails a `quarantine` expectation goes to the quarantine frame even
when it also fails a `drop` one: quarantined rows are kept, dropped rows are not.
`failed_expectations` lists every expectation the row failed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from warehouse.quality.errors import ExpectationFailed, QualityError
from warehouse.spec.expectations import (
    EXPECTATION_TYPES,
    expectation_id,
    is_row_level,
    normalize_type_name,
)
from warehouse.spec.table import Expectation

if TYPE_CHECKING:
    from types import TracebackType

logger = logging.getLogger(__name__)

MAX_SHOWN_ROWS = 5
"""Offending rows named in an `ExpectationFailed` message."""

COORDINATES = ("_topic", "_partition", "_offset", "_timestamp")
"""Kafka coordinates carried by Kafka-sourced tables; kept out of the quarantined `row`."""

QUARANTINE_SCHEMA = StructType(
    [
        StructField("reason", StringType()),
        StructField("failed_expectations", ArrayType(StringType())),
        StructField("batch_id", LongType()),
        StructField("source_topic", StringType()),
        StructField("source_partition", IntegerType()),
        StructField("source_offset", LongType()),
        StructField("source_timestamp", TimestampType()),
        StructField("raw_key", BinaryType()),
        StructField("raw_value", BinaryType()),
        StructField("row", StringType()),
        StructField("quarantined_at", TimestampType()),
    ]
)
"""One schema for every quarantined record: failed expectations and parse errors alike."""

_FLAG = "__quality_failed_"


@dataclass(frozen=True)
class RowCheck:
    """One compiled row-level expectation.

    `applies` is true for the rows the expectation judges (non-null column,
    except for the null checks); `passes` is its predicate on those rows.
    """

    id: str
    expectation: Expectation
    applies: Column
    passes: Column

    @property
    def on_violation(self) -> str:
        return self.expectation.on_violation

    @property
    def mostly(self) -> float | None:
        value = self.expectation.kwargs.get("mostly")
        return None if value is None else float(value)

    def failed_column(self) -> Column:
        """True when the row is judged and fails; never null."""
        return F.coalesce(self.applies & ~self.passes, F.lit(False))


@dataclass
class CheckedBatch:
    """The outcome of the checks on one batch.

    `keep` is what the table receives; `quarantine` (or None when no row was
    quarantined) has `QUARANTINE_SCHEMA`. Both read the persisted batch: call
    `unpersist()` once they are written (or use the object as a context manager).
    """

    keep: DataFrame
    quarantine: DataFrame | None
    metrics: list[dict[str, Any]]
    _persisted: DataFrame | None = field(default=None, repr=False)

    def unpersist(self) -> None:
        if self._persisted is not None:
            self._persisted.unpersist()
            self._persisted = None

    def __enter__(self) -> CheckedBatch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.unpersist()


def _columns_by_name(
    columns: StructType | Sequence[str] | Sequence[StructField],
) -> dict[str, DataType | None]:
    if isinstance(columns, StructType):
        return {f.name: f.dataType for f in columns.fields}
    out: dict[str, DataType | None] = {}
    for c in columns:
        if isinstance(c, StructField):
            out[c.name] = c.dataType
        else:
            out[str(c)] = None
    return out


def _text(column: Column, dtype: DataType | None) -> Column:
    """Regex and length checks work on strings; other types are judged by their text."""
    if dtype is None or isinstance(dtype, StringType | BinaryType):
        return column
    return column.cast("string")


def _type_matches(dtype: DataType | None, wanted: Sequence[str], *, where: str) -> bool:
    if dtype is None:
        raise QualityError(
            f"{where}: the column types are needed to check a type; compile the checks "
            "with the batch schema (a StructType), not column names"
        )
    actual = normalize_type_name(dtype.simpleString())
    if isinstance(dtype, DecimalType):
        actual = "decimal"
    return actual in {normalize_type_name(w) for w in wanted}


def _predicate(
    exp: Expectation, cols: dict[str, DataType | None], *, where: str
) -> tuple[Column, Column]:
    """(applies, passes) for one expectation, with the column names checked."""
    kw = exp.kwargs
    etype = EXPECTATION_TYPES[exp.type]
    for arg in etype.columns_args:
        name = kw.get(arg)
        if name not in cols:
            known = ", ".join(f"`{c}`" for c in cols)
            raise QualityError(
                f"{where}: `{arg}` `{name}` is not a column of the table ({known}). "
                "Fix the expectation's column name or add the column to the table."
            )
    if exp.type == "expect_column_pair_values_a_to_be_greater_than_b":
        a, b = F.col(kw["column_A"]), F.col(kw["column_B"])
        return a.isNotNull() & b.isNotNull(), (a >= b) if kw.get("or_equal") else (a > b)
    name = kw["column"]
    c = F.col(name)
    dtype = cols[name]
    t = exp.type
    if t == "expect_column_values_to_not_be_null":
        return F.lit(True), c.isNotNull()
    if t == "expect_column_values_to_be_null":
        return F.lit(True), c.isNull()
    applies = c.isNotNull()
    if t in ("expect_column_values_to_be_between", "expect_column_value_lengths_to_be_between"):
        v = F.length(_text(c, dtype)) if "lengths" in t else c
        ok = F.lit(True)
        if kw.get("min_value") is not None:
            lo = F.lit(kw["min_value"])
            ok = ok & ((v > lo) if kw.get("strict_min") else (v >= lo))
        if kw.get("max_value") is not None:
            hi = F.lit(kw["max_value"])
            ok = ok & ((v < hi) if kw.get("strict_max") else (v <= hi))
        return applies, ok
    if t == "expect_column_values_to_be_in_set":
        return applies, c.isin(list(kw["value_set"]))
    if t == "expect_column_values_to_not_be_in_set":
        return applies, ~c.isin(list(kw["value_set"]))
    if t == "expect_column_values_to_match_regex":
        return applies, _text(c, dtype).rlike(kw["regex"])
    if t == "expect_column_values_to_not_match_regex":
        return applies, ~_text(c, dtype).rlike(kw["regex"])
    if t == "expect_column_values_to_be_of_type":
        return applies, F.lit(_type_matches(dtype, [kw["type_"]], where=where))
    if t == "expect_column_values_to_be_in_type_list":
        return applies, F.lit(_type_matches(dtype, kw["type_list"], where=where))
    if t == "expect_column_value_lengths_to_equal":
        return applies, F.length(_text(c, dtype)) == F.lit(kw["value"])
    raise QualityError(f"{where}: `{t}` is registered as row-level but has no Spark predicate")


class RowChecks:
    """The compiled row-level expectations of one table.

    Immutable after `compile`; `apply` may run from the query's foreachBatch
    thread while other tables' queries run theirs (it keeps no state between calls).
    """

    def __init__(self, checks: Sequence[RowCheck], *, table: str | None = None) -> None:
        self.checks = list(checks)
        self.table = table

    @property
    def empty(self) -> bool:
        return not self.checks

    @classmethod
    def compile(
        cls,
        expectations: Sequence[Expectation],
        columns: StructType | Sequence[str] | Sequence[StructField],
        *,
        table: str | None = None,
    ) -> RowChecks:
        """Spark predicates for the row-level expectations; table-level ones are skipped."""
        cols = _columns_by_name(columns)
        checks: list[RowCheck] = []
        seen: set[str] = set()
        for i, exp in enumerate(expectations):
            if not is_row_level(exp):
                continue
            eid = expectation_id(exp)
            where = f"Table `{table or '?'}`, expectation {i + 1} `{eid}`"
            if eid in seen:
                raise QualityError(
                    f"{where}: two expectations are named `{eid}`; give one a distinct `name`"
                )
            seen.add(eid)
            applies, passes = _predicate(exp, cols, where=where)
            checks.append(RowCheck(id=eid, expectation=exp, applies=applies, passes=passes))
        return cls(checks, table=table)

    @property
    def fail_fast(self) -> bool:
        """Whether a violation can fail the batch: then the batch must be judged whole
        before anything is written (`apply`), not while it is written (`observe`)."""
        return any(c.on_violation == "fail" for c in self.checks)

    def apply(self, batch_df: DataFrame, *, table: str, batch_id: int) -> CheckedBatch:
        """Judge one batch: counts per expectation, then warn / drop / quarantine / fail."""
        if not self.checks:
            return CheckedBatch(keep=batch_df, quarantine=None, metrics=[])
        persisted = None
        if not batch_df.is_cached:
            batch_df = batch_df.persist(StorageLevel.MEMORY_AND_DISK)
            persisted = batch_df
        try:
            return self._apply(batch_df, persisted, table=table, batch_id=batch_id)
        except BaseException:
            if persisted is not None:
                persisted.unpersist()
            raise

    def observe(self, batch_df: DataFrame, observation: Observation) -> DataFrame:
        """`batch_df` without the rows a `drop` or `quarantine` expectation removes, judged
        row by row as the rows pass: one pass, nothing persisted.

        `observation` (unused) collects the counts of the first action over the result;
        read them with `observed_metrics`. The quarantined rows are not in the result:
        build them with `quarantined` from a frame of the same batch, only when
        `observed_metrics` says there are any. Not for `fail_fast` checks, which must
        see the whole batch before any row is written."""
        if self.fail_fast:
            raise QualityError(
                f"Table `{self.table or '?'}`: expectations with on_violation `fail` are "
                "judged before the write (RowChecks.apply), not while writing"
            )
        data_cols = batch_df.columns
        flags = self._flag_names()
        flagged = self._flagged(batch_df, flags)
        removed = self._any(
            [f for c, f in zip(self.checks, flags, strict=True) if c.on_violation != "warn"]
        )
        quarantined = self._any(
            [f for c, f in zip(self.checks, flags, strict=True) if c.on_violation == "quarantine"]
        )
        observed = flagged.observe(
            observation,
            F.count(F.lit(1)).alias("rows"),
            F.coalesce(F.sum(removed.cast("long")), F.lit(0)).alias("removed"),
            F.coalesce(F.sum(quarantined.cast("long")), F.lit(0)).alias("quarantined"),
            *self._aggregates(flags),
        )
        return observed.filter(~removed).select(*data_cols)

    def observed_metrics(
        self, observed: dict[str, Any], *, table: str, batch_id: int
    ) -> list[dict[str, Any]]:
        """The per-expectation metrics (as `CheckedBatch.metrics`) of an `observe` pass."""
        return self._metrics(observed, self._flag_names(), table=table, batch_id=batch_id)

    def quarantined(self, batch_df: DataFrame, *, batch_id: int) -> DataFrame:
        """The rows of `batch_df` that a `quarantine` expectation sends to quarantine, as
        quarantine rows (`QUARANTINE_SCHEMA`); the counterpart of `observe`."""
        flags = self._flag_names()
        q = [f for c, f in zip(self.checks, flags, strict=True) if c.on_violation == "quarantine"]
        return self._quarantine(
            self._flagged(batch_df, flags), q, batch_df.columns, flags, batch_id=batch_id
        )

    # -- shared by apply and observe -----------------------------------------

    def _flag_names(self) -> list[str]:
        return [f"{_FLAG}{i}" for i in range(len(self.checks))]

    def _flagged(self, batch_df: DataFrame, flags: list[str]) -> DataFrame:
        return batch_df.select(
            "*", *[c.failed_column().alias(f) for c, f in zip(self.checks, flags, strict=True)]
        )

    def _aggregates(self, flags: list[str]) -> list[Column]:
        aggs = []
        for c, f in zip(self.checks, flags, strict=True):
            aggs.append(
                F.coalesce(F.sum(F.when(c.applies, 1).otherwise(0)), F.lit(0)).alias(f"{f}_checked")
            )
            aggs.append(F.coalesce(F.sum(F.col(f).cast("long")), F.lit(0)).alias(f"{f}_failed"))
        return aggs

    @staticmethod
    def _any(flags: list[str]) -> Column:
        if not flags:
            return F.lit(False)
        return F.greatest(*[F.col(f) for f in flags]) if len(flags) > 1 else F.col(flags[0])

    def _metrics(
        self, row: Any, flags: list[str], *, table: str, batch_id: int
    ) -> list[dict[str, Any]]:
        metrics: list[dict[str, Any]] = []
        for c, f in zip(self.checks, flags, strict=True):
            checked = int(row[f"{f}_checked"] or 0)
            failed = int(row[f"{f}_failed"] or 0)
            passed = checked - failed
            mostly = c.mostly
            success = (
                failed == 0 if mostly is None else (checked == 0 or passed / checked >= mostly)
            )
            metrics.append(
                {
                    "table": table,
                    "batch_id": int(batch_id),
                    "expectation": c.id,
                    "type": c.expectation.type,
                    "on_violation": c.on_violation,
                    "checked": checked,
                    "passed": passed,
                    "failed": failed,
                    "success": success,
                }
            )
            if failed:
                logger.info(
                    "table %s batch %s: expectation %s failed for %d of %d rows (%s)",
                    table,
                    batch_id,
                    c.id,
                    failed,
                    checked,
                    c.on_violation,
                )
        return metrics

    def _quarantine(
        self,
        flagged: DataFrame,
        quarantine_flags: list[str],
        data_cols: list[str],
        flags: list[str],
        *,
        batch_id: int,
    ) -> DataFrame:
        names = F.filter(
            F.array(
                *[F.when(F.col(f), F.lit(c.id)) for c, f in zip(self.checks, flags, strict=True)]
            ),
            lambda x: x.isNotNull(),
        )
        q = flagged.filter(self._any(quarantine_flags)).withColumn("__failed_names", names)
        return _to_quarantine(
            q,
            data_cols=data_cols,
            reason=F.concat(F.lit("failed expectations: "), F.concat_ws(", ", "__failed_names")),
            failed=F.col("__failed_names"),
            batch_id=batch_id,
            raw_key=None,
            raw_value=None,
        )

    def _apply(
        self, batch_df: DataFrame, persisted: DataFrame | None, *, table: str, batch_id: int
    ) -> CheckedBatch:
        data_cols = batch_df.columns
        flags = self._flag_names()
        flagged = self._flagged(batch_df, flags)
        row = flagged.agg(*self._aggregates(flags)).collect()[0]
        metrics = self._metrics(row, flags, table=table, batch_id=batch_id)
        for c, f, m in zip(self.checks, flags, metrics, strict=True):
            if c.on_violation == "fail" and not m["success"]:
                rows = flagged.filter(F.col(f)).select(*data_cols).limit(MAX_SHOWN_ROWS).collect()
                raise ExpectationFailed(
                    table=table,
                    expectation=c.id,
                    batch_id=batch_id,
                    failed=m["failed"],
                    checked=m["checked"],
                    rows=[r.asDict(recursive=True) for r in rows],
                )
        quarantine_flags = [
            f
            for c, f, m in zip(self.checks, flags, metrics, strict=True)
            if c.on_violation == "quarantine" and m["failed"]
        ]
        drop_flags = [
            f
            for c, f, m in zip(self.checks, flags, metrics, strict=True)
            if c.on_violation == "drop" and m["failed"]
        ]
        removed = quarantine_flags + drop_flags
        if not removed:
            keep = batch_df
        else:
            keep = flagged.filter(~self._any(removed)).select(*data_cols)
        quarantine = None
        if quarantine_flags:
            quarantine = self._quarantine(
                flagged, quarantine_flags, data_cols, flags, batch_id=batch_id
            )
        return CheckedBatch(keep=keep, quarantine=quarantine, metrics=metrics, _persisted=persisted)


def compile_row_checks(
    expectations: Sequence[Expectation],
    columns: StructType | Sequence[str] | Sequence[StructField],
    *,
    table: str | None = None,
) -> RowChecks:
    """Same as `RowChecks.compile`."""
    return RowChecks.compile(expectations, columns, table=table)


def _coordinate(df_cols: Sequence[str], name: str, dtype: str) -> Column:
    return F.col(name).cast(dtype) if name in df_cols else F.lit(None).cast(dtype)


def _to_quarantine(
    df: DataFrame,
    *,
    data_cols: Sequence[str],
    reason: Column,
    failed: Column,
    batch_id: int,
    raw_key: str | None,
    raw_value: str | None,
) -> DataFrame:
    payload = [c for c in data_cols if c not in COORDINATES]
    row = (
        F.to_json(F.struct(*[F.col(c) for c in payload]), {"ignoreNullFields": "false"})
        if payload
        else F.lit(None)
    )
    return df.select(
        reason.cast("string").alias("reason"),
        failed.cast("array<string>").alias("failed_expectations"),
        F.lit(int(batch_id)).cast("bigint").alias("batch_id"),
        _coordinate(data_cols, "_topic", "string").alias("source_topic"),
        _coordinate(data_cols, "_partition", "int").alias("source_partition"),
        _coordinate(data_cols, "_offset", "bigint").alias("source_offset"),
        _coordinate(data_cols, "_timestamp", "timestamp").alias("source_timestamp"),
        (F.col(raw_key) if raw_key else F.lit(None)).cast("binary").alias("raw_key"),
        (F.col(raw_value) if raw_value else F.lit(None)).cast("binary").alias("raw_value"),
        row.cast("string").alias("row"),
        F.current_timestamp().alias("quarantined_at"),
    ).to(QUARANTINE_SCHEMA)


def quarantine_from_parse_errors(bad_df: DataFrame, *, batch_id: int) -> DataFrame:
    """`parse_kafka`'s `bad` frame (`key, value, _topic, ..., _error`) as quarantine rows.

    `reason` is `parse error: <_error>`, `failed_expectations` is empty, the raw
    key and value are kept as bytes and `row` is null (there is no parsed row).
    """
    cols = bad_df.columns
    error = F.col("_error") if "_error" in cols else F.lit("unknown")
    return _to_quarantine(
        bad_df,
        data_cols=[c for c in cols if c in COORDINATES],
        reason=F.concat(F.lit("parse error: "), F.coalesce(error.cast("string"), F.lit("unknown"))),
        failed=F.array().cast("array<string>"),
        batch_id=batch_id,
        raw_key="key" if "key" in cols else None,
        raw_value="value" if "value" in cols else None,
    )
