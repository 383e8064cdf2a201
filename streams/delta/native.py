"""The native engine's writes and reads: the same contract on Spark's own `delta` format
(delta-spark jars); `streams.delta.engine.NativeDelta` is its face.

Only usable where the JVM has `io.delta.tables.DeltaTable` (Databricks, a cluster
started with delta-spark); `native_delta_available(spark)` tells. Appends use Delta's
idempotent writes (`txnAppId`/`txnVersion`), merges the delta-spark Python API, and
the commit info goes to `userMetadata` as JSON (`recorded_offsets` reads both forms).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from streams.delta.errors import NativeEngineUnavailableError
from streams.delta.scd2 import apply_scd2
from streams.delta.sink import DELETE_FLAG, dedupe_changes
from streams.delta.target import DeltaTarget

logger = logging.getLogger(__name__)


def native_delta_available(spark: SparkSession) -> bool:
    """True when the session's JVM can load delta-spark (`io.delta.tables.DeltaTable`)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: ask the server by trying the format instead
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
    spark = df.sparkSession
    _require(spark, target.path)
    from delta.tables import DeltaTable  # delta-spark's Python API, present with its jars

    user_meta = json.dumps(dict(commit_info or {}), sort_keys=True)
    if target.mode == "append":
        writer = (
            df.write.format("delta")
            .mode("append")
            .option("txnAppId", target.app_id)
            .option("txnVersion", int(batch_id))
            .option("mergeSchema", "true")
            .option("userMetadata", user_meta)
        )
        if target.partition_by:
            writer = writer.partitionBy(*target.partition_by)
        writer.save(target.path)
    elif target.mode == "upsert":
        changes = dedupe_changes(df, target)
        if not DeltaTable.isDeltaTable(spark, target.path):
            (
                changes.limit(0)
                .drop(DELETE_FLAG)
                .write.format("delta")
                .partitionBy(*target.partition_by)
                .option("delta.enableChangeDataFeed", "true")
                .save(target.path)
            )
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in target.keys)
        newer = "true"
        if target.sequence_by:
            seq = f"`{target.sequence_by}`"
            newer = f"(t.{seq} IS NULL OR s.{seq} >= t.{seq})"
        cols = {c: f"s.`{c}`" for c in changes.columns if c != DELETE_FLAG}
        # Delta's idempotent DML: the session confs play the role of txnAppId/txnVersion.
        confs = {
            "spark.databricks.delta.commitInfo.userMetadata": user_meta,
            "spark.databricks.delta.write.txnAppId": target.app_id,
            "spark.databricks.delta.write.txnVersion": str(int(batch_id)),
        }
        for k, v in confs.items():
            spark.conf.set(k, v)
        try:
            (
                DeltaTable.forPath(spark, target.path)
                .alias("t")
                .merge(changes.alias("s"), on)
                .whenMatchedDelete(f"s.`{DELETE_FLAG}` AND {newer}")
                .whenMatchedUpdate(f"NOT s.`{DELETE_FLAG}` AND {newer}", cols)
                .whenNotMatchedInsert(f"NOT s.`{DELETE_FLAG}`", cols)
                .execute()
            )
        finally:
            for k in confs:
                spark.conf.unset(k)
    else:
        return apply_scd2(df, batch_id, target, commit_info=commit_info)
    return DeltaTable.forPath(spark, target.path).history(1).collect()[0]["version"]


def read_delta_stream_native(
    spark: SparkSession, path: str, *, read: str, max_versions_per_trigger: int | None
) -> DataFrame:
    _require(spark, path)
    reader = spark.readStream.format("delta")
    if read == "changes":
        reader = reader.option("readChangeFeed", "true")
    if max_versions_per_trigger:
        # Delta's own limit is in files; one version of a streaming sink is usually one
        # batch's files, so this is the closest native knob.
        reader = reader.option("maxFilesPerTrigger", str(max_versions_per_trigger))
    return reader.load(path)
