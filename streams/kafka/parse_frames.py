"""The split of one parse into `good` and `bad` frames: the expressions a format builds
(`_Exprs`), applied to a frame with or without a persisted stage and an observer.

Only the flag is computed for every record; the explanation of a bad row runs after
the filter, on the flagged rows alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from streams.kafka.columns import COORDINATES, KAFKA_COLUMNS

Persist = Callable[[DataFrame], DataFrame]
"""`persist` hook of `parse_kafka`: given every record of the batch once, flat and flagged
(`FLAGGED_COLUMN`). It may also drop rows: `good` and `bad` then hold only what it kept."""

FLAGGED_COLUMN = "__wh_flagged"
"""In the frame a `persist` hook is given: true for the records bound for `bad`, beside
the good columns (null or partial for those records)."""


class ParsedFrames(NamedTuple):
    """`good`: typed rows plus Kafka coordinates; `bad`: the raw record and `_error`."""

    good: DataFrame
    bad: DataFrame


def _coordinates() -> list[Column]:
    return [F.col(c.removeprefix("_")).alias(c) for c in COORDINATES]


class _Stage(NamedTuple):
    persist: Persist | None
    reparse: Callable[[DataFrame], ParsedFrames]
    observe: Observation | None


_RAW = "__wh_raw_"
_FLAG, _KEEP = FLAGGED_COLUMN, "__wh_keep"


class _Exprs(NamedTuple):
    """Every Column one parse applies, built from the format, schema, required fields and
    keys alone: unresolved expressions do not depend on the frame they are applied to, and
    building them is ~1500 Py4J calls (0.35-0.6 s of the driver per batch, measured on a
    5-field schema), so `_exprs` builds them once per JVM and reuses them."""

    staged: tuple[tuple[str, Column], ...]
    """Columns added one after another before the split (`_parsed`, ...)."""
    good: tuple[Column, ...]
    flag: Column
    keep: Column
    observe_plain: tuple[Column, ...]
    observe_persisted: tuple[Column, ...]
    plain_good: Column
    plain_bad: Column
    persisted_good: Column
    persisted_bad: Column
    bad: tuple[Column, ...]
    flat: tuple[Column, ...]
    raw_back: tuple[Column, ...]


def _make_exprs(
    staged: list[tuple[str, Column]],
    good_cols: list[Column],
    flagged: Column,
    explain: Column,
    keep: Column | None = None,
    keys: Sequence[tuple[str, Column]] = (),
) -> _Exprs:
    """`keys`: (name, value in the good row) of the columns a good row must have
    non-null; a row without one is bad with "key column `name` is null" (a sink that
    places rows by key cannot take it, and would fail the whole batch)."""
    keep = F.lit(True) if keep is None else keep
    flag = F.coalesce(flagged, F.lit(False))
    if keys:
        why = F.when(flag, explain)
        for name, value in keys:
            why = why.when(value.isNull(), F.lit(f"key column `{name}` is null"))
            flag = flag | value.isNull()
        explain = why
    flag_col, keep_col = F.col(_FLAG), F.col(_KEEP)
    return _Exprs(
        staged=tuple(staged),
        good=tuple(good_cols),
        flag=flag,
        keep=keep,
        observe_plain=_metrics(
            flag_col & keep, at=record_hash(F.col("topic"), F.col("partition"), F.col("offset"))
        ),
        observe_persisted=_metrics(keep_col & flag_col),
        plain_good=~flag_col,
        plain_bad=flag_col,
        persisted_good=keep_col & ~flag_col,
        persisted_bad=keep_col & flag_col,
        bad=(F.col("key"), F.col("value"), *_coordinates(), explain.alias("_error")),
        flat=(
            *[F.col(c).alias(_RAW + c) for c in KAFKA_COLUMNS],
            *good_cols,
            flag.alias(_FLAG),
            keep.alias(_KEEP),
        ),
        raw_back=tuple(F.col(_RAW + c).alias(c) for c in KAFKA_COLUMNS),
    )


CLUSTER_COLUMN = "cluster"
"""The source column a federated read adds (the record's cluster); parsed rows, good and
bad, carry it as `_cluster`."""


def _with_cluster(e: _Exprs) -> _Exprs:
    """`e` carrying the record's cluster (`cluster` → `_cluster`) into good and bad rows."""
    tagged = F.col(CLUSTER_COLUMN).alias("_" + CLUSTER_COLUMN)
    raw = _RAW + CLUSTER_COLUMN
    return e._replace(
        good=(*e.good, tagged),
        bad=(*e.bad, tagged),
        flat=(F.col(CLUSTER_COLUMN).alias(raw), *e.flat[:-2], tagged, *e.flat[-2:]),
        raw_back=(*e.raw_back, F.col(raw).alias(CLUSTER_COLUMN)),
    )


def _split(df: DataFrame, e: _Exprs, stage: _Stage) -> ParsedFrames:
    """`good`/`bad` of `df` parsed by `e`. Only the flag is computed for every record: the
    explanation (a second, VARIANT parse of the text) runs on the flagged rows alone,
    after the filter, where it costs nothing for a clean batch.

    With a `stage`, what gets persisted is flat: the Kafka columns, the good columns
    already extracted and the flags; no `_parsed` struct and no `headers` (Spark caches
    nested values one by one, several times slower than the parse itself). The
    explanation of the bad rows is then computed by parsing those few rows again."""
    if CLUSTER_COLUMN in df.columns:
        e = _with_cluster(e)
    staged = df
    for name, col in e.staged:
        staged = staged.withColumn(name, col)
    if stage.persist is None:
        s = staged.withColumn(_FLAG, e.flag)
        # Without an observer in between, Spark pushes the good/bad filter below the
        # projection that parses and inlines the parse into it: every record would be
        # parsed twice (measured: 4.0-4.9 s against 2.6 s per 1M). Observed metrics are
        # a node filters do not cross, so one of our own is always there.
        observe = stage.observe or f"__wh_parse_{uuid.uuid4().hex}"
        s = s.observe(observe, *e.observe_plain).where(e.keep)
        good = s.where(e.plain_good).select(*e.good)
        bad = s.where(e.plain_bad).select(*e.bad)
        return ParsedFrames(good, bad)
    flat = stage.persist(staged.select(*e.flat))
    if stage.observe is not None:
        flat = flat.observe(stage.observe, *e.observe_persisted)
    names = [c for c in flat.columns if c not in (_FLAG, _KEEP) and not c.startswith(_RAW)]
    good = flat.where(e.persisted_good).select(*names)
    flagged_raw = flat.where(e.persisted_bad).select(*e.raw_back)
    return ParsedFrames(good, stage.reparse(flagged_raw).bad)


def persisted_counts(flat: DataFrame) -> tuple[int, int]:
    """The records a `persist` hook was given (`flat`, as it persisted them) and how
    many of those are bound for `bad`, in one Spark job."""
    row = flat.agg(F.count(F.lit(1)), _count(F.col(_FLAG) & F.col(_KEEP))).first()
    assert row is not None  # an aggregate without grouping has one row
    return int(row[0]), int(row[1])


SUSPECTS_CAP = 100_000
"""The most records whose hashes an observation lists (`hashes_of`): beyond it, a batch
with that many bad records is read again whole."""


def record_hash(topic: Column, partition: Column, offset: Column) -> Column:
    """A long naming a Kafka record by its coordinates (two records may share one: a
    filter by these hashes keeps a superset of the records it was built from)."""
    return F.xxhash64(topic, partition, offset)


def hashes_of(flagged: Column, at: Column) -> Column:
    """An aggregate: the `record_hash`es (`at`) of the rows where `flagged`, as one
    comma-separated string, or null when there are more than `SUSPECTS_CAP`."""
    return F.when(
        _count(flagged) <= SUSPECTS_CAP,
        F.concat_ws(",", F.collect_list(F.when(flagged, at.cast("string")))),
    )


def _count(flagged: Column) -> Column:
    """An aggregate: how many rows are `flagged` (0 for none)."""
    return F.coalesce(F.sum(flagged.cast("long")), F.lit(0))


def parse_hashes(value: str | None) -> set[int] | None:
    """The hashes a `hashes_of` aggregate listed; None when it listed none (too many)."""
    if value is None:
        return None
    return {int(h) for h in value.split(",") if h}


def _metrics(flagged: Column, *, at: Column | None = None) -> tuple[Column, ...]:
    """`records` (every record) and `flagged` (those bound for `bad`); with `at`, the
    record hashes of the flagged ones (`flagged_at`, `hashes_of`)."""
    metrics = (
        F.count(F.lit(1)).alias("records"),
        _count(flagged).alias("flagged"),
    )
    if at is None:
        return metrics
    return (*metrics, hashes_of(flagged, at).alias("flagged_at"))


def _observed(df: DataFrame, observe: Observation | str | None, flagged: Column) -> DataFrame:
    """`df` reporting `records` (every record) and `flagged` (those bound for `bad`) to
    `observe` (an `Observation`, or a name for `df.observe`)."""
    if observe is None:
        return df
    return df.observe(observe, *_metrics(flagged))
