"""The native engine's writes and reads: the same contract on Spark's own `delta` format
(delta-spark jars); `streams.delta.engine.NativeDelta` is its face.

Only usable where the JVM has `io.delta.tables.DeltaTable` (Databricks, a cluster
started with delta-spark); `native_delta_available(spark)` tells. The commit info goes
to `userMetadata` as JSON (`recorded_offsets` reads both forms), with the writer and the
batch. An append is skipped when the newest commit of its writer has its batch (read by
delta-rs), merges use Delta's idempotent DML (`txnAppId`/`txnVersion`); an upsert's first
batch, into the table it creates, is an append with the same app transaction.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from streams.delta._confs import session_confs
from streams.delta.adds import add_actions, file_bytes, file_rows
from streams.delta.changes import flagged, last_change_per_key
from streams.delta.commit import (
    KeptTable,
    already_committed,
    committed,
    kept_table,
    load_table,
    nothing_written,
)
from streams.delta.driver_merge import local_path, merge_on_driver, mergeable, scd2_on_driver
from streams.delta.errors import DeltaSchemaError, NativeEngineUnavailableError
from streams.delta.faults import crash_point
from streams.delta.files import CODEC, ZSTD_LEVEL
from streams.delta.native_maintenance import optimize_native
from streams.delta.scd2 import ACTION, plan_batch
from streams.delta.scd2_plan import ARRIVAL, IS_CURRENT, VALID_TO
from streams.delta.schema import arrow_schema, check_partitioning, check_types
from streams.delta.sink import DELETE_FLAG, dedupe_changes, null_key_error, refuse_null_keys
from streams.delta.source import read_snapshot_python
from streams.delta.tables import appended_from_the_start
from streams.delta.target import TABLE_CONFIGURATION, DeltaTarget, batch_commit_info
from streams.delta.tombstones import (
    keep_after_tombstones,
    keep_after_tombstones_spark,
    record_tombstones,
)
from streams.sessions import connect_has_format, is_connect

logger = logging.getLogger(__name__)

_CODEC_CONF = "spark.sql.parquet.compression.codec"


def native_delta_available(spark: SparkSession) -> bool:
    """True when the session's JVM can load delta-spark (`io.delta.tables.DeltaTable`); on
    Spark Connect, when the server knows the `delta` format."""
    if is_connect(spark):
        return connect_has_format(spark, "delta")
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    try:
        jvm.java.lang.Class.forName(
            "io.delta.tables.DeltaTable",
            False,
            jvm.java.lang.Thread.currentThread().getContextClassLoader(),
        )
        return True
    except Exception:  # noqa: BLE001 - py4j raises its own type for ClassNotFoundException
        return False


def _require(spark: SparkSession, path: str) -> None:
    if not native_delta_available(spark):
        raise NativeEngineUnavailableError(
            f"Delta table `{path}`: engine `native` needs delta-spark on the Spark "
            "classpath (io.delta.tables.DeltaTable not found). Start Spark with the "
            "delta-spark package, or use engine `python`.",
            path=path,
        )


def write_batch_native(
    df: DataFrame,
    batch_id: int,
    target: DeltaTarget,
    *,
    commit_info: Mapping[str, Any] | None = None,
) -> int | None:
    """Write one micro-batch with delta-spark; the new version, or None when the table
    shows the batch is in already (a replay after a crash)."""
    spark = df.sparkSession
    _require(spark, target.path)
    with kept_table(target.path) as kept:
        return _write_batch(df, batch_id, target, kept, commit_info)


def _write_batch(
    df: DataFrame,
    batch_id: int,
    target: DeltaTarget,
    kept: KeptTable,
    commit_info: Mapping[str, Any] | None,
) -> int | None:
    spark = df.sparkSession
    table = kept.get()
    before = None if table is None else table.version()
    user_meta = json.dumps(batch_commit_info(target, batch_id, commit_info), sort_keys=True)
    if table is not None and target.mode != "append":
        # A MERGE casts a changed type to the table's (failing on a value that does not
        # cast) and keeps the table's partitioning whatever the sink asks, where the
        # Python engine refuses the batch: refused here alike.
        check_partitioning(table, target.partition_by, path=target.path)
        _check_types(df, table, target)
    try:
        if target.mode == "append":
            if already_committed(table, target, batch_id):
                return None
            _append(df, batch_id, target, user_meta)
        elif target.mode == "upsert":
            _upsert(df, batch_id, target, user_meta, table)
        elif already_committed(table, target, batch_id):
            return None
        else:
            _scd2(df, batch_id, target, user_meta, commit_info)
    except Exception as e:
        if table is not None and any(r in str(e) for r in _SCHEMA_REFUSALS):
            _explain_refusal(df, target, table, e)
        raise
    after = kept.version()
    if after == before and not target.record_empty and not committed(target, batch_id):
        nothing_written(target, batch_id, after)
        return after
    if after == before and target.mode == "append":
        # an append of no rows: Delta committed nothing, the batch is recorded by itself
        _record_if_skipped(df, batch_id, target, user_meta)
        after = kept.version()
    if after == before:
        logger.info(
            "Delta table %s: batch %d of app `%s` already committed; skipped",
            target.name,
            batch_id,
            target.app_id,
        )
        return None
    crash_point("after_commit")
    if target.optimize_every and after and after % target.optimize_every == 0:
        optimize_native(spark, target.path)
    return after


_SCHEMA_REFUSALS = ("DELTA_FAILED_TO_MERGE_FIELDS", "DELTA_METADATA_MISMATCH")
"""delta-spark's refusals of an append whose schema or partitioning is not the table's:
"Failed to merge fields 'amount' and 'amount'", "A metadata mismatch was detected"."""


def _explain_refusal(df: DataFrame, target: DeltaTarget, table: Any, error: Exception) -> None:
    """Raise the Python engine's `DeltaSchemaError` for what delta-spark refused (the
    partitioning, or the column whose type changed), chained from delta-spark's error;
    return when neither explains it."""
    try:
        check_partitioning(table, target.partition_by, path=target.path)
        _check_types(df, table, target)
    except DeltaSchemaError as clear:
        raise clear from error


def _check_types(df: DataFrame, table: Any, target: DeltaTarget) -> None:
    """`check_types` for the batch; a batch with a type Arrow has no form for (an
    interval, a variant) is left to delta-spark."""
    incoming = _arrow_form(df.schema)
    if incoming is not None:
        check_types(table, incoming, path=target.path)


def _arrow_form(schema: StructType) -> pa.Schema | None:
    """The Arrow form of a Spark schema, or None when a type has none (an interval, a
    variant)."""
    try:
        return arrow_schema(schema)
    except (TypeError, NotImplementedError):
        return None


def _writer(df: DataFrame, batch_id: int, target: DeltaTarget, user_meta: str, *, txn: bool) -> Any:
    """An append recording the batch in `userMetadata`; with `txn`, also Delta's app
    transaction (`txnAppId`/`txnVersion`), which makes Delta skip it when the table has
    the batch already. A table this engine creates gets the properties it would get on
    the Python engine (`TABLE_CONFIGURATION`: the change data feed, so `read: changes`
    works downstream whichever engine wrote the table, and the checkpoint interval)."""
    writer = df.write.format("delta").mode("append")
    if txn:
        writer = writer.option("txnAppId", target.app_id).option("txnVersion", int(batch_id))
    writer = _with_table_configuration(
        writer.option("mergeSchema", "true").option("userMetadata", user_meta)
    )
    if target.partition_by:
        writer = writer.partitionBy(*target.partition_by)
    return writer


def _with_table_configuration(writer: Any) -> Any:
    """`writer` with the properties of a table it creates (delta-spark takes `delta.*`
    options as table properties when the write creates the table, and ignores them on
    an existing one)."""
    for key, value in TABLE_CONFIGURATION.items():
        writer = writer.option(key, value)
    return writer


def _append(df: DataFrame, batch_id: int, target: DeltaTarget, user_meta: str) -> None:
    """A batch's append, after `write_batch_native` found it is not in the table yet.
    Without an app transaction: delta-spark checks one by reading the table's whole
    state (three Spark jobs and about 0.8 s of CPU a batch on a small table); the batch
    and the writer in `userMetadata` are what a replay is recognised by."""
    _save(df, batch_id, target, user_meta, txn=False)


def _save(df: DataFrame, batch_id: int, target: DeltaTarget, user_meta: str, *, txn: bool) -> None:
    """Append `df` as batch `batch_id` (`_writer`) with the Python engine's Parquet
    settings; a crash point just before the commit."""
    crash_point("before_commit")
    writer = _writer(df, batch_id, target, user_meta, txn=txn)
    with _parquet_settings(df, target) as codec:
        if codec is not None:
            writer = writer.option("compression", codec)
        writer.save(target.path)


@contextmanager
def _parquet_settings(df: DataFrame, target: DeltaTarget) -> Iterator[str | None]:
    """The Parquet settings of the Python engine's writers for one delta-spark append:
    zstd level 1 unless the session sets its own codec (the codec it yields, for the
    writer's `compression` option, or None), and no dictionary for `target.unique_columns`.
    Delta passes a writer only its `compression` option, and builds the Parquet writer's
    Hadoop configuration from the session's settings, so the rest are session settings,
    restored after the write (`df`'s session is the query's own clone)."""
    spark = df.sparkSession
    confs = {
        f"parquet.enable.dictionary#{c}": "false" for c in target.unique_columns if c in df.columns
    }
    codec = None
    if spark.conf.get(_CODEC_CONF, None) is None:
        codec = CODEC
        confs["parquet.compression.codec.zstd.level"] = str(ZSTD_LEVEL)
    with session_confs(spark, confs):
        yield codec


SMALL_MERGE_ROWS = 10_000
SMALL_MERGE_INPUT_BYTES = 8 << 20
"""A MERGE whose batch has at most `SMALL_MERGE_ROWS` changes, computed from an input
Spark estimates at no more than `SMALL_MERGE_INPUT_BYTES` (a source whose size Spark
does not know counts as larger), into a table of at most `SMALL_MERGE_ROWS` rows,
evaluates its expressions without generating code (`_INTERPRETED`). Spark writes code
for the projections of each of a MERGE's tasks, much of it for Delta's wide log schema,
and on a small MERGE that cost up to two fifths of its CPU; per row, interpreted
evaluation costs about 2.6 times as much, and a MERGE computes its source again and
runs every row of the files it rewrites (docs/decisions/0011; docs/benchmarks.md, "Native engine: a small
MERGE")."""

_INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def _rows(table: Any) -> int | None:
    """The rows of a delta-rs table by its files' statistics (0 for no table yet), or
    None when a file has none."""
    return 0 if table is None else file_rows(add_actions(table))


UNKNOWN_SIZE = 2**63 - 1
"""Spark's size of a plan that states none (`Long.MaxValue`)."""


def _estimated_bytes(df: DataFrame) -> int:
    """Spark's estimate of `df`'s size (its default, far above any limit here, for a
    source that states none, such as a Kafka batch). A Spark Connect client sees no plan
    statistics: to it every batch is of unknown size, merged by delta-spark."""
    if is_connect(df.sparkSession):
        return UNKNOWN_SIZE
    return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


def _small(
    changes: int, table_rows: Callable[[], int | None], input_bytes: Callable[[], int]
) -> bool:
    """Whether a MERGE of `changes` rows computed from `input_bytes()` of input into a
    table of `table_rows()` is small (`SMALL_MERGE_ROWS`). Each is asked only when the
    ones before it allow a small MERGE: a large table's files and a large plan's
    statistics are not listed for a MERGE that has too many changes."""
    if changes > SMALL_MERGE_ROWS:
        return False
    rows = table_rows()
    if rows is None or rows > SMALL_MERGE_ROWS:
        return False
    return input_bytes() <= SMALL_MERGE_INPUT_BYTES


@contextmanager
def _idempotent_dml(
    spark: SparkSession,
    batch_id: int,
    target: DeltaTarget,
    user_meta: str,
    *,
    small: bool,
    extra: Mapping[str, str] | None = None,
) -> Iterator[None]:
    """Delta's idempotent DML: for a MERGE these session settings play the role of the
    writer's `txnAppId`/`txnVersion` (and `userMetadata`). `spark` is the micro-batch's
    own session (each streaming query runs on a clone), so queries do not see each
    other's settings (`session_confs`). A `small` MERGE (`SMALL_MERGE_ROWS`) also
    evaluates its expressions without generating code, unless the session sets code
    generation itself. `extra`: more settings for this MERGE alone."""
    confs = {
        "spark.databricks.delta.commitInfo.userMetadata": user_meta,
        "spark.databricks.delta.write.txnAppId": target.app_id,
        "spark.databricks.delta.write.txnVersion": str(int(batch_id)),
        # New columns of the batch are added to the table, as `mergeSchema` does for appends.
        "spark.databricks.delta.schema.autoMerge.enabled": "true",
    }
    confs.update(extra or {})
    if small:
        confs.update({k: v for k, v in _INTERPRETED.items() if spark.conf.get(k, None) is None})
        logger.debug(
            "Delta table %s: batch %d: a small MERGE, no generated code", target.name, batch_id
        )
    with session_confs(spark, confs):
        yield


def _create_empty(df: DataFrame, target: DeltaTarget) -> None:

    if load_table(target.path) is not None:
        return
    writer = _with_table_configuration(df.limit(0).write.format("delta"))
    if target.partition_by:
        writer = writer.partitionBy(*target.partition_by)
    writer.save(target.path)


def _upsert(
    df: DataFrame,
    batch_id: int,
    target: DeltaTarget,
    user_meta: str,
    table: Any,
) -> None:

    spark = df.sparkSession
    changes, few = _changes(df, target)
    if few is None:
        n = _count_refusing_null_keys(changes, batch_id, target)
    else:
        n = few.num_rows
        refuse_null_keys(few, target, batch_id)
    if table is None:
        _create_empty(changes.drop(DELETE_FLAG), target)
    if n == 0 and not target.record_empty:
        # Delta commits a MERGE of no rows for its app transaction: no MERGE at all.
        return
    if few is not None:
        if target.sequence_by:
            deletes = few.filter(few.column(DELETE_FLAG))
            few = keep_after_tombstones(
                few, record_tombstones(deletes, target, touched=few), target
            )
        if table is None:
            _insert_first(
                spark.createDataFrame(few, schema=changes.schema), batch_id, target, user_meta
            )
            return
        small = _small(n, lambda: _rows(table), lambda: few.nbytes)
        if small and not is_connect(spark) and mergeable(table, target, changes.schema):
            crash_point("before_commit")
            if merge_on_driver(spark, few, target, batch_id, user_meta, table=table) is not None:
                return
        source = spark.createDataFrame(few, schema=changes.schema)
    else:
        source = changes
        if target.sequence_by:
            keys = [*target.keys, target.sequence_by]
            deletes = changes.where(F.col(DELETE_FLAG)).select(*keys).toArrow()
            record_tombstones(deletes, target, touched=deletes)
            source = keep_after_tombstones_spark(changes, target)
        if table is None:
            _insert_first(source, batch_id, target, user_meta)
            return
        small = _small(n, lambda: _rows(table), lambda: _estimated_bytes(df))
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in target.keys)
    newer = "true"
    if target.sequence_by:
        seq = f"`{target.sequence_by}`"
        newer = f"(t.{seq} IS NULL OR s.{seq} >= t.{seq})"
    cols = {c: f"s.`{c}`" for c in changes.columns if c != DELETE_FLAG}
    crash_point("before_commit")
    extra = _LOCAL_SOURCE if few is not None else None
    with _idempotent_dml(spark, batch_id, target, user_meta, small=small, extra=extra):
        _merge(
            spark,
            target.path,
            source,
            on,
            delete=f"s.`{DELETE_FLAG}` AND {newer}",
            update=(f"NOT s.`{DELETE_FLAG}` AND {newer}", cols),
            insert=(f"NOT s.`{DELETE_FLAG}`", cols),
        )
    _record_if_skipped(df, batch_id, target, user_meta)


def _insert_first(source: DataFrame, batch_id: int, target: DeltaTarget, user_meta: str) -> None:
    """The first batch of an upsert, into the table `_create_empty` has just made: its
    changes other than deletes, appended with Delta's app transaction. Into a table with
    no rows, the MERGE inserts exactly these and matches nothing, yet computes its source
    twice (once to find the files it touches, once to write) and runs delta-spark's
    MERGE; the append is one write, and the same commit for exactly-once (its
    `txnAppId`/`txnVersion` make a replay skip it) and for the change feed (its rows are
    inserts). A replay finds the table and goes the MERGE's way, skipped by the same
    app transaction."""
    _save(
        source.where(~F.col(DELETE_FLAG)).drop(DELETE_FLAG), batch_id, target, user_meta, txn=True
    )


Clause = tuple[str | None, dict[str, str]]
"""A MERGE clause: its condition (None: every row) and its column expressions."""


def _merge(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    on: str,
    *,
    delete: str | None = None,
    update: Clause,
    insert: Clause,
) -> None:
    """MERGE `source` (as `s`) into the Delta table at `path` (as `t`): matched rows
    deleted where `delete` holds, else updated by `update`; unmatched rows inserted by
    `insert`. delta-spark's Python API on a classic session; on Spark Connect the same
    statement in SQL, which needs only Delta's SQL extension on the server (delta-spark's
    Connect API needs Delta's Connect plugin there too)."""
    if is_connect(spark):
        _merge_sql(spark, path, source, on, delete=delete, update=update, insert=insert)
        return
    from delta.tables import DeltaTable

    builder = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), on)
    if delete is not None:
        builder = builder.whenMatchedDelete(delete)
    builder = builder.whenMatchedUpdate(update[0], update[1])
    builder.whenNotMatchedInsert(insert[0], insert[1]).execute()


def _merge_sql(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    on: str,
    *,
    delete: str | None,
    update: Clause,
    insert: Clause,
) -> None:
    def when(condition: str | None) -> str:
        return "" if condition is None else f" AND ({condition})"

    clauses = [] if delete is None else [f"WHEN MATCHED{when(delete)} THEN DELETE"]
    sets = ", ".join(f"t.`{c}` = {e}" for c, e in update[1].items())
    clauses.append(f"WHEN MATCHED{when(update[0])} THEN UPDATE SET {sets}")
    columns = ", ".join(f"`{c}`" for c in insert[1])
    values = ", ".join(insert[1].values())
    clauses.append(f"WHEN NOT MATCHED{when(insert[0])} THEN INSERT ({columns}) VALUES ({values})")
    view = f"warehouse_merge_source_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        location = path.replace("`", "``")
        spark.sql(
            f"MERGE INTO delta.`{location}` AS t USING `{view}` AS s ON {on} " + " ".join(clauses)
        ).collect()
    finally:
        spark.catalog.dropTempView(view)


_LOCAL_SOURCE = {"spark.databricks.delta.merge.materializeSource": "none"}
"""For a MERGE from rows on the driver: Delta persists a MERGE's source first (a Spark
job and a local checkpoint) lest it change between the MERGE's two passes; a local
relation gives the same rows to both."""


def _changes(df: DataFrame, target: DeltaTarget) -> tuple[DataFrame, pa.Table | None]:
    """The batch's changes as a frame and, for a batch known to be small, on the driver,
    deduped. A batch of one change per key (`DeltaTarget.one_change_per_key`) is collected
    as it is and checked there (docs/decisions/0073); if it is not small, its changes
    are deduped in Spark all the same, as a MERGE's source must hold a key once."""
    if target.one_change_per_key:
        changes = flagged(df, target)
        few = _collect_few(df, changes)
        if few is not None:
            return changes, last_change_per_key(few, target)
    changes = dedupe_changes(df, target)
    return changes, None if target.one_change_per_key else _collect_few(df, changes)


def _collect_few(df: DataFrame, changes: DataFrame) -> pa.Table | None:
    """A small batch's deduped `changes` on the driver, or None for a batch that is not
    known to be small (`SMALL_MERGE_INPUT_BYTES`: a persisted batch, as the writer's
    general path gives, states its size) or has a type Arrow has no form for.

    On the driver, the null keys, the count and the tombstones are checked in Arrow, and
    the MERGE reads a local relation: the batch's dedupe runs once, where a frame is
    computed again by every Spark job that reads it, the MERGE's among them."""
    if _estimated_bytes(df) > SMALL_MERGE_INPUT_BYTES or _arrow_form(changes.schema) is None:
        return None
    return changes.toArrow()


def _count_refusing_null_keys(changes: DataFrame, batch_id: int, target: DeltaTarget) -> int:
    """The number of changes; refused when one has a null key, which a MERGE would
    insert and no later change could match. One Spark job for the count and all keys;
    which key it was is asked only when one is null."""
    any_null = " OR ".join(f"`{k}` IS NULL" for k in target.keys)
    seen = changes.agg(
        F.count(F.lit(1)).alias("n"), F.max(F.expr(any_null).cast("int")).alias("null_key")
    ).first()
    assert seen is not None  # an aggregate without grouping has one row
    if seen["null_key"]:
        k = next(k for k in target.keys if not changes.where(F.col(k).isNull()).isEmpty())
        raise null_key_error(target, batch_id, k)
    return int(seen["n"])


def _scd2(
    df: DataFrame,
    batch_id: int,
    target: DeltaTarget,
    user_meta: str,
    commit_info: Mapping[str, Any] | None,
) -> None:
    """SCD2 as a delta-spark MERGE of the same plan the Python engine applies: the batch's
    changes (collected to the driver: CDC batches of dimensions are small) against the
    current rows of the keys they touch. A small plan into a small table is merged on
    the driver instead (`driver_merge.scd2_on_driver`)."""

    spark = df.sparkSession
    rows = df.withColumn(ARRIVAL, F.monotonically_increasing_id()).toArrow()
    planned, source, counts = plan_batch(rows, batch_id, target, schema=arrow_schema(df.schema))
    if source is None:
        _record_if_skipped(df, batch_id, target, user_meta)
        return
    on = " AND ".join(
        [
            *(f"t.`{k}` = s.`{k}`" for k in target.keys),
            f"s.`{ACTION}` = 'close'",
            f"t.`{IS_CURRENT}` = true",
        ]
    )
    small = _small(source.num_rows, lambda: _rows(planned), lambda: source.nbytes)
    # The driver's commit goes through delta-spark's JVM classes: a classic session's only.
    schema = from_arrow_schema(source.schema)
    if small and not is_connect(spark) and mergeable(planned, target, schema, drop=ACTION):
        if scd2_on_driver(spark, planned, source, target, batch_id, user_meta) is not None:
            _log_scd2(target, batch_id, counts)
            return
    data = [c for c in source.column_names if c != ACTION]
    staged = spark.createDataFrame(source)
    with _idempotent_dml(spark, batch_id, target, user_meta, small=small, extra=_LOCAL_SOURCE):
        _merge(
            spark,
            target.path,
            staged,
            on,
            update=(None, {VALID_TO: f"s.`{VALID_TO}`", IS_CURRENT: "false"}),
            insert=(f"s.`{ACTION}` = 'insert'", {c: f"s.`{c}`" for c in data}),
        )
    _log_scd2(target, batch_id, counts)


def _log_scd2(target: DeltaTarget, batch_id: int, counts: tuple[int, int]) -> None:
    logger.info(
        "Delta table %s: batch %d: closed %d version(s), inserted %d",
        target.name,
        batch_id,
        *counts,
    )


def _record_if_skipped(
    df: DataFrame,
    batch_id: int,
    target: DeltaTarget,
    user_meta: str,
) -> None:
    """A MERGE that changes no row commits nothing, nor does an append of no rows without
    an app transaction; an empty idempotent append (which Delta commits for its app
    transaction) then records the batch (and its offsets) in the log, unless the target
    does not record empty batches (`record_empty`)."""
    if not target.record_empty or committed(target, batch_id):
        return
    spark = df.sparkSession
    empty = spark.read.format("delta").load(target.path).limit(0)
    _writer(empty, batch_id, target, user_meta, txn=True).save(target.path)


SMALL_SNAPSHOT_BYTES = 32 << 20
"""A table read as a snapshot (the static side of a stream-static join) whose files hold
at most this many bytes, on the local file system and of a protocol delta-rs reads, is
read with delta-rs (`read_snapshot_native`)."""


def read_snapshot_native(spark: SparkSession, path: str) -> DataFrame:
    """The latest version of `path` as a static DataFrame that reads the version that is
    the latest at each execution.

    Spark's `delta` reader lists a new version's files by rebuilding its state in Spark
    jobs when the batch is planned: a dimension that changes between the batches of the
    stream joined with it costs each of them those jobs. A small local table a delta-rs
    reader can read (`SMALL_SNAPSHOT_BYTES`, reader version 1) is read as the Python
    engine reads it: one task lists and reads the newest version's files with delta-rs
    (`source.read_snapshot_python`). Which way is decided once, when the query starts;
    any other table keeps Spark's reader."""
    _require(spark, path)
    local = local_path(path)
    table = load_table(local) if local is not None else None
    if (
        table is not None
        and table.protocol().min_reader_version == 1
        and file_bytes(add_actions(table)) <= SMALL_SNAPSHOT_BYTES
    ):
        return read_snapshot_python(spark, local)
    return spark.read.format("delta").load(path)


def read_delta_stream_native(
    spark: SparkSession, path: str, *, read: str, max_versions_per_trigger: int | None
) -> DataFrame:
    _require(spark, path)
    reader = spark.readStream.format("delta")
    if read == "changes":
        # From the table's first version, as the Python engine reads it: without a
        # starting version Delta would give the current snapshot as inserts instead of
        # the changes that led to it (an upsert's deletes and pre-images would be lost).
        reader = reader.option("readChangeFeed", "true").option("startingVersion", "0")
    elif (local := local_path(path)) is not None and appended_from_the_start(local):
        # Delta's snapshot start lists the table's state in about fifteen small Spark
        # jobs before the first batch; a table only appended to gives the same rows
        # version by version, as the Python engine always reads it (decision 0069).
        reader = reader.option("startingVersion", "0")
    if max_versions_per_trigger:
        # Delta's own limit is in files; one version of a streaming sink is usually one
        # batch's files, so this is the closest native knob.
        reader = reader.option("maxFilesPerTrigger", str(max_versions_per_trigger))
    return reader.load(path)
