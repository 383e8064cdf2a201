"""One batch down the Arrow path (`streams.landing`), with the table's row expectations.

`WritePaths.write_arrow` hands the batch here when `WritePaths.arrow_payload` took the
table. The tasks read, type, judge (`warehouse.quality.arrow_rows`, when the table has
row-level expectations) and write in Arrow; then, on the driver:

- the records Arrow handed back are parsed by Spark and their good rows judged as they
  are written (`RowChecks.observe`: no extra job), their bad rows quarantined;
- the records the tasks knew were bad (a null value, a value cut off, a plainly typed
  row without a required field) were not handed back: the tasks wrote their quarantine
  rows (`warehouse.quality.arrow_quarantine`) in files that join the quarantine's
  commit;
- the held rows (typed by Arrow, failing a `quarantine` expectation) become quarantine
  rows through `RowChecks.quarantined`, with the reasons of Spark's path;
- the quarantine is committed after the table, both with the batch's app transaction,
  and the quality events carry both sides' counts. Its rows are counted by what already
  ran (the tasks' counts, the observations of the fallback's write), not by a job.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from warehouse.runtime.write_paths import Outcome, WritePaths

logger = logging.getLogger(__name__)


def rows_schema(payload: Any) -> Any:
    """The Spark schema of the Arrow path's typed rows: the payload (a StructType), then
    the Kafka coordinates (the columns the row checks compile against)."""
    from pyspark.sql.types import StructField, StructType

    from streams.kafka import COORDINATES, SCHEMA

    coords = [StructField(c, SCHEMA[c.removeprefix("_")].dataType) for c in COORDINATES]
    return StructType([*payload.fields, *coords])


def write_arrow(
    paths: WritePaths,
    df: DataFrame,
    batch_id: int,
    cache: Callable[[DataFrame], DataFrame],
    rules: Any,
) -> Outcome | None:
    """The batch through `streams.landing`: Kafka read, parsed, judged by `rules` (the
    table's `ArrowChecks`, or None) and written in Arrow in Spark's tasks; records Arrow
    hands back parsed and judged by Spark. None when that path cannot take this batch
    (its ranges are not readable from the plan, or its tasks failed): nothing was
    committed."""
    from pyspark.sql import Observation

    from streams.delta import arrow_schema
    from streams.landing import kafka_json_append, planned_partitions
    from warehouse.quality.arrow_quarantine import ParseErrorRows
    from warehouse.quality.quarantine import QUARANTINE_SCHEMA
    from warehouse.runtime.write_paths import Outcome, _observed

    partitions = planned_partitions(df, paths.kafka_fetch())
    if partitions is None:
        return None
    name = paths.defn.name
    payload = paths.arrow_payload()
    checks = paths._compiled_checks(rows_schema(payload)) if rules is not None else None
    judged: list[tuple[DataFrame, Any]] = []  # the fallback's good rows, their Observation

    def judge(good: DataFrame) -> DataFrame:
        seen = Observation(f"wh_arrow_{name}_{batch_id}_{uuid.uuid4().hex[:8]}")
        judged.append((good, seen))
        return checks.observe(good, seen)

    info = paths.targets.commit_info(batch_id)
    known = ParseErrorRows(
        paths.targets.target(quarantine=True).path,
        arrow_schema(QUARANTINE_SCHEMA),
        batch_id,
        datetime.now(UTC),
    )
    with kafka_json_append(
        df.sparkSession,
        partitions,
        paths.targets.target(quarantine=False),
        batch_id,
        payload=payload,
        commit_info=info,
        rules=rules,
        judge=judge if rules is not None else None,
        known_bad=known,
    ) as done:
        if done is None:
            return None
        parts = []
        # The quarantine's rows, counted without a job of their own while every part's
        # count is known: the held rows the tasks counted, the fallback's bad rows
        # observed while its good rows were written, the quarantined ones among those
        # observed likewise. None: count them before writing.
        rows: int | None = 0
        if done.bad is not None:
            parts.append(paths._parse_quarantine(done.bad, batch_id))
            bad = _observed(done.bad_seen)
            rows = None if bad is None else rows + int(bad["flagged"])
        if done.held is not None:
            parts.append(checks.quarantined(done.held, batch_id=batch_id))
            rows = None if rows is None else rows + done.held_rows
        checked, failed, dropped = list(done.checked), list(done.failed), done.dropped
        cached = []
        for good, seen in judged:
            c = _observed(seen)
            if c is None:  # the write reported no counts: judge the rows again, whole
                logger.warning(
                    "table %s: batch %d: the fallback's write reported no counts; "
                    "judging its rows again",
                    name,
                    batch_id,
                )
                whole = checks.apply(good, table=name, batch_id=batch_id)
                cached.append(whole)
                metrics = whole.metrics
                if whole.quarantine is not None:
                    parts.append(whole.quarantine)
                    rows = None
                dropped += whole.dropped
            else:
                metrics = checks.observed_metrics(c, table=name, batch_id=batch_id)
                if c["quarantined"]:
                    parts.append(checks.quarantined(good, batch_id=batch_id))
                    rows = None if rows is None else rows + int(c["quarantined"])
                dropped += int(c["removed"]) - int(c["quarantined"])
            checked = [a + m["checked"] for a, m in zip(checked, metrics, strict=True)]
            failed = [a + m["failed"] for a, m in zip(failed, metrics, strict=True)]
        try:
            if done.known_files:
                quarantined = _with_known(paths, df.sparkSession, done, parts, batch_id, info)
            elif parts:
                quarantined = paths._write_quarantine(parts, batch_id, info, cache, rows=rows)
            else:
                quarantined = 0
        finally:
            for whole in cached:
                whole.unpersist()
        if checks is not None:
            metrics = checks.counted_metrics(checked, failed, table=name, batch_id=batch_id)
            paths._quality_events(df.sparkSession, batch_id, metrics)
        logger.debug(
            "table %s: batch %d: %d of %d records typed by Arrow",
            name,
            batch_id,
            done.typed,
            done.records,
        )
        return Outcome(done.records, done.written, quarantined, dropped, done.version)


def _with_known(
    paths: WritePaths,
    spark: Any,
    done: Any,
    parts: list[DataFrame],
    batch_id: int,
    info: dict[str, Any],
) -> int:
    """The quarantine's commit when the tasks wrote quarantine files (`done.known_files`,
    a `KafkaJsonAppend`'s): those files and the files Spark writes of `parts`, in one
    commit with the batch's app transaction; the rows committed. Should the quarantine
    table be partitioned (the framework makes it unpartitioned), the tasks' rows are
    written again by Spark with the rest."""
    from streams.delta import append_files, arrow_schema, write_files
    from warehouse.quality.quarantine import QUARANTINE_SCHEMA

    target = paths.targets.target(quarantine=True)
    schema = arrow_schema(QUARANTINE_SCHEMA)
    rows = [0]

    def write(partition_by: list[str]) -> list[Any]:
        files: list[Any] = []
        frames = list(parts)
        if partition_by:
            root = target.path.rstrip("/")
            frames.append(
                spark.read.schema(QUARANTINE_SCHEMA).parquet(
                    *[f"{root}/{f[0]}" for f in done.known_files]
                )
            )
        else:
            files += done.known_files
            rows[0] += done.known_rows
        if frames:
            q = frames[0]
            for other in frames[1:]:
                q = q.unionByName(other)
            more = write_files(q, target.path, schema, partition_by, target.unique_columns)
            rows[0] += sum(json.loads(f[3])["numRecords"] for f in more)
            files += more
        return files

    append_files(target, batch_id, schema, write, commit_info=info)
    return rows[0]
