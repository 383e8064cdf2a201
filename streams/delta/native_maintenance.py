"""Compaction and vacuum with delta-spark (`OPTIMIZE`, `VACUUM`), for the native engine.

The same contract as `maintenance.optimize` / `maintenance.vacuum` (delta-rs): the
compaction commits `dataChange=false`, so stream readers skip it and the writers' app
transactions are untouched; vacuum deletes what the table stopped referencing more than
the retention ago. With the native engine a table's writers are Delta's own, so its
maintenance is too (its conflict checks against a running stream are Delta's).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streams.delta._confs import session_confs
from streams.delta.errors import DeltaTableNotFoundError
from streams.delta.tables import is_table
from streams.sessions import default_parallelism, is_connect

logger = logging.getLogger(__name__)

_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# delta-spark 4.4 ignores a VACUUM's `RETAIN n HOURS` other than 0 by default (it then
# keeps what the table's `delta.deletedFileRetentionDuration` says, 7 days, and logs a
# warning): the caller's retention would be dropped without a word.
_RETENTION_WINDOW_IGNORE = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"
# VACUUM lists the table's directories in this many tasks (Spark's default 10000, sized for
# tables of many partitions on a cluster); one task per core of the session is plenty for
# the tables a streaming warehouse keeps and keeps a local vacuum from running 10000 tasks.
_LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


def _table(spark: SparkSession, path: str | Path, what: str) -> Any:
    """delta-spark's table at `path`; on Spark Connect only checked to be there (None):
    delta-spark's Connect API needs Delta's Connect plugin on the server, its SQL only
    Delta's SQL extension, so the callers run SQL there."""
    from delta.tables import DeltaTable

    if is_connect(spark):
        if not is_table(str(path)):
            raise DeltaTableNotFoundError(
                f"No Delta table at `{path}` to {what}; run the table's query first "
                "(`warehouse run --table ...`).",
                path=str(path),
            )
        return None
    if not DeltaTable.isDeltaTable(spark, str(path)):
        raise DeltaTableNotFoundError(
            f"No Delta table at `{path}` to {what}; run the table's query first "
            "(`warehouse run --table ...`).",
            path=str(path),
        )
    return DeltaTable.forPath(spark, str(path))


def optimize_native(spark: SparkSession, path: str | Path) -> dict[str, Any]:
    """Compact small files (`OPTIMIZE`); returns Delta's metrics (`numFilesAdded`,
    `numFilesRemoved`, ...)."""
    table = _table(spark, path, "optimize")
    if table is None:  # Spark Connect
        location = str(path).replace("`", "``")
        result = spark.sql(f"OPTIMIZE delta.`{location}`").collect()
    else:
        result = table.optimize().executeCompaction().collect()
    metrics = result[0]["metrics"].asDict(recursive=True) if result else {}
    logger.info(
        "Delta table %s: optimize removed %s files, added %s",
        path,
        metrics.get("numFilesRemoved"),
        metrics.get("numFilesAdded"),
    )
    return metrics


def vacuum_native(
    spark: SparkSession,
    path: str | Path,
    retention_hours: int = 168,
    *,
    dry_run: bool = False,
    force: bool = False,
) -> list[str]:
    """Delete files the table stopped referencing more than `retention_hours` ago
    (`VACUUM ... RETAIN n HOURS`); returns them. Delta's check of the retention against
    the table's `delta.deletedFileRetentionDuration` holds unless `force`; its default of
    ignoring the retention asked for is off."""
    table = _table(spark, path, "vacuum")
    location = str(path).replace("`", "``")
    settings = {
        _RETENTION_CHECK: "false" if force else "true",
        _RETENTION_WINDOW_IGNORE: "false",
    }
    if spark.conf.get(_LISTING_PARALLELISM, None) is None:
        settings[_LISTING_PARALLELISM] = str(default_parallelism(spark))
    with session_confs(spark, settings):
        files = [
            row[0]
            for row in spark.sql(
                f"VACUUM delta.`{location}` RETAIN {int(retention_hours)} HOURS DRY RUN"
            ).collect()
        ]
        if not dry_run and files:
            if table is None:  # Spark Connect
                spark.sql(
                    f"VACUUM delta.`{location}` RETAIN {int(retention_hours)} HOURS"
                ).collect()
            else:
                table.vacuum(float(retention_hours))
    logger.info(
        "Delta table %s: vacuum %s %d files",
        path,
        "would delete" if dry_run else "deleted",
        len(files),
    )
    return files
