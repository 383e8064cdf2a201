"""One batch down the Arrow path (`streams.landing`), with the table's row expectations.

`WritePaths.write_arrow` hands the batch here when `WritePaths.arrow_payload` took the
table. The tasks read, type, judge (`warehouse.quality.arrow_rows`, when the table has
row-level expectations) and write in Arrow; then, on the driver:

- the records Arrow handed back are parsed by Spark and their good rows judged as they
  are written (`RowChecks.observe`: no extra job), their bad rows quarantined;
- the held rows (typed by Arrow, failing a `quarantine` expectation) become quarantine
  rows through `RowChecks.quarantined`, with the reasons of Spark's path;
- the quarantine is committed after the table, both with the batch's app transaction,
  and the quality events carry both sides' counts. Its rows are counted by what already
  ran (the tasks' counts, the observations of the fallback's write), not by a job.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
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

    from streams.landing import kafka_json_append, planned_partitions
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
    with kafka_json_append(
        df.sparkSession,
        partitions,
        paths.targets.target(quarantine=False),
        batch_id,
        payload=payload,
        commit_info=info,
        rules=rules,
        judge=judge if rules is not None else None,
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
            quarantined = (
                paths._write_quarantine(parts, batch_id, info, cache, rows=rows) if parts else 0
            )
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
