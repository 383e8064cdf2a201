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
    StructField,
    StructType,
)

from warehouse.quality.arrow_quarantine import FAILED_EXPECTATIONS
from warehouse.quality.errors import ExpectationFailed, QualityError
from warehouse.quality.predicates import columns_by_name, predicate
from warehouse.quality.quarantine import to_quarantine
from warehouse.spec.expectations import (
    expectation_id,
    is_row_level,
)
from warehouse.spec.table import Expectation

if TYPE_CHECKING:
    from types import TracebackType

logger = logging.getLogger(__name__)

MAX_SHOWN_ROWS = 5
"""Offending rows named in an `ExpectationFailed` message."""

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
    quarantined) has `warehouse.quality.quarantine.QUARANTINE_SCHEMA`. Both read the persisted batch: call
    `unpersist()` once they are written (or use the object as a context manager).
    `rows`, `kept` and `quarantined` count the batch, `keep` and `quarantine`, from the
    checks' own pass: no job of their own.
    """

    keep: DataFrame
    quarantine: DataFrame | None
    metrics: list[dict[str, Any]]
    rows: int
    kept: int
    quarantined: int
    _persisted: DataFrame | None = field(default=None, repr=False)

    @property
    def dropped(self) -> int:
        """The rows a `drop` expectation removed: neither kept nor quarantined."""
        return self.rows - self.kept - self.quarantined

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
        cols = columns_by_name(columns)
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
            applies, passes = predicate(exp, cols, where=where)
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
            n = batch_df.count()
            return CheckedBatch(
                keep=batch_df, quarantine=None, metrics=[], rows=n, kept=n, quarantined=0
            )
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
        `observed_metrics` says there are any. Rows with Kafka coordinates also report
        `quarantined_at`, the `record_hash`es of the quarantined ones
        (`streams.kafka.hashes_of`). Not for `fail_fast` checks, which must
        see the whole batch before any row is written."""
        if self.fail_fast:
            raise QualityError(
                f"Table `{self.table or '?'}`: expectations with on_violation `fail` are "
                "judged before the write (RowChecks.apply), not while writing"
            )
        # The checks' predicates are written into the observation and the filter rather
        # than projected once as flag columns: each DataFrame call analyses the batch's
        # whole plan again, and on a small batch two of them cost more than evaluating a
        # predicate twice (docs/decisions/0076-expectations-observed-in-two-dataframes.md).
        failed = [c.failed_column() for c in self.checks]
        removed = _any_of(
            [f for c, f in zip(self.checks, failed, strict=True) if c.on_violation != "warn"]
        )
        quarantined = _any_of(
            [f for c, f in zip(self.checks, failed, strict=True) if c.on_violation == "quarantine"]
        )
        listed: list[Column] = []
        if all(c in batch_df.columns for c in ("_topic", "_partition", "_offset")):
            # rows read from Kafka: which records to read again for the quarantine
            from streams.kafka import hashes_of, record_hash

            at = record_hash(F.col("_topic"), F.col("_partition"), F.col("_offset"))
            listed.append(hashes_of(quarantined, at).alias("quarantined_at"))
        observed = batch_df.observe(
            observation,
            F.count(F.lit(1)).alias("rows"),
            F.coalesce(F.sum(removed.cast("long")), F.lit(0)).alias("removed"),
            F.coalesce(F.sum(quarantined.cast("long")), F.lit(0)).alias("quarantined"),
            *listed,
            *self._aggregates(self._flag_names(), failed),
        )
        return observed.filter(~removed)

    def observed_metrics(
        self, observed: dict[str, Any], *, table: str, batch_id: int
    ) -> list[dict[str, Any]]:
        """The per-expectation metrics (as `CheckedBatch.metrics`) of an `observe` pass."""
        return self._metrics(observed, self._flag_names(), table=table, batch_id=batch_id)

    def counted_metrics(
        self,
        checked: Sequence[int],
        failed: Sequence[int],
        *,
        table: str,
        batch_id: int,
    ) -> list[dict[str, Any]]:
        """The per-expectation metrics (as `CheckedBatch.metrics`) of counts made
        elsewhere, one `checked` and one `failed` per check in order (the Arrow tasks'
        `warehouse.quality.arrow_rows.ArrowChecks`)."""
        flags = self._flag_names()
        row: dict[str, int] = {}
        for f, c, x in zip(flags, checked, failed, strict=True):
            row[f"{f}_checked"], row[f"{f}_failed"] = int(c), int(x)
        return self._metrics(row, flags, table=table, batch_id=batch_id)

    def quarantined(self, batch_df: DataFrame, *, batch_id: int) -> DataFrame:
        """The rows of `batch_df` that a `quarantine` expectation sends to quarantine, as
        quarantine rows (`warehouse.quality.quarantine.QUARANTINE_SCHEMA`); the counterpart of `observe`."""
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

    def _aggregates(self, flags: list[str], failed: list[Column]) -> list[Column]:
        """Per check, the rows it judged and the rows that `failed` it (an expression or
        its flag column), named after its flag."""
        aggs = []
        for c, f, bad in zip(self.checks, flags, failed, strict=True):
            aggs.append(
                F.coalesce(F.sum(F.when(c.applies, 1).otherwise(0)), F.lit(0)).alias(f"{f}_checked")
            )
            aggs.append(F.coalesce(F.sum(bad.cast("long")), F.lit(0)).alias(f"{f}_failed"))
        return aggs

    @staticmethod
    def _rows_where(condition: Column) -> Column:
        """The rows for which `condition` (never null here) holds."""
        return F.coalesce(F.sum(F.when(condition, 1).otherwise(0)), F.lit(0))

    @staticmethod
    def _any(flags: list[str]) -> Column:
        return _any_of([F.col(f) for f in flags])

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
        return to_quarantine(
            q,
            data_cols=data_cols,
            reason=F.concat(F.lit(FAILED_EXPECTATIONS), F.concat_ws(", ", "__failed_names")),
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
        by_kind = {
            kind: [f for c, f in zip(self.checks, flags, strict=True) if c.on_violation == kind]
            for kind in ("quarantine", "drop")
        }
        row = flagged.agg(
            *self._aggregates(flags, [F.col(f) for f in flags]),
            F.count(F.lit(1)).alias("__rows"),
            self._rows_where(~self._any(by_kind["quarantine"] + by_kind["drop"])).alias("__kept"),
            self._rows_where(self._any(by_kind["quarantine"])).alias("__quarantined"),
        ).collect()[0]
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
        return CheckedBatch(
            keep=keep,
            quarantine=quarantine,
            metrics=metrics,
            rows=int(row["__rows"]),
            kept=int(row["__kept"]),
            quarantined=int(row["__quarantined"]),
            _persisted=persisted,
        )


def _any_of(conditions: list[Column]) -> Column:
    """True where any of `conditions` (never null) holds; false without any."""
    if not conditions:
        return F.lit(False)
    return F.greatest(*conditions) if len(conditions) > 1 else conditions[0]


def compile_row_checks(
    expectations: Sequence[Expectation],
    columns: StructType | Sequence[str] | Sequence[StructField],
    *,
    table: str | None = None,
) -> RowChecks:
    """Same as `RowChecks.compile`."""
    return RowChecks.compile(expectations, columns, table=table)
