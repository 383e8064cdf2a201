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
  rows with the reasons and `row` of Spark's path: built in Arrow here and written in a
  file that joins the quarantine's commit (`_held_quarantine`), or, where that cannot
  write them as Spark does, by Spark (`RowChecks.quarantined`);
- the quarantine is committed after the table, both with the batch's app transaction,
  and the quality events carry both sides' counts. Its rows are counted by what already
  ran (the tasks' counts, the observations of the fallback's write), not by a job.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Iterator
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
        # Quarantine files to commit beside Spark's parts: the tasks' known bad records,
        # the held rows' when the driver writes them.
        files, file_rows = list(done.known_files), done.known_rows
        if done.held is not None:
            held = _held_quarantine(df.sparkSession, done.held_paths, rules, payload, known)
            if held is None:
                parts.append(checks.quarantined(done.held, batch_id=batch_id))
                rows = None if rows is None else rows + done.held_rows
            else:
                files += held
                file_rows += done.held_rows
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
            if files:
                quarantined = _with_files(
                    paths, df.sparkSession, files, file_rows, parts, batch_id, info
                )
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


def _held_quarantine(
    spark: Any, staged: tuple[str, ...], rules: Any, payload: Any, known: Any
) -> list[Any] | None:
    """The held rows' quarantine rows (`staged`, the tasks' files of them) built on the
    driver in Arrow (`arrow_quarantine.HeldRows`) and written in a file of the
    quarantine table (`known`'s: a `ParseErrorRows`), uncommitted; None when only Spark
    builds them as its path does (`RowChecks.quarantined`): a payload type
    `writes_json` does not write, a double that is not finite, a timestamp outside
    years 1000-9999 or a session time zone other than UTC, a staged file this process
    cannot read, no JVM to write doubles."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from streams.delta import file_writer
    from streams.delta.sink import file_entry
    from warehouse.quality.arrow_quarantine import HeldRows, timestamps_in_range, writes_json
    from warehouse.quality.quarantine import java_doubles

    doubles = java_doubles(spark)
    names = [f.name for f in payload.fields]
    if doubles is None or not all(os.path.exists(p) for p in staged):
        return None
    files = [pq.ParquetFile(p) for p in staged]

    def blocks(columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        # The held rows a block at a time: a batch can hold many.
        for f in files:
            yield from f.iter_batches(batch_size=_HELD_BLOCK, columns=columns)

    schema = files[0].schema_arrow
    if not all(writes_json(schema.field(n).type) for n in names):
        return None
    checked = [n for n in names if pa.types.is_floating(schema.field(n).type)]
    times = [n for n in names if pa.types.is_timestamp(schema.field(n).type)]
    if times and not _utc(spark):
        return None
    for block in blocks(checked + times) if checked or times else ():
        for n in checked:
            if pc.any(pc.invert(pc.is_finite(block.column(n)))).as_py():
                return None
        if not all(timestamps_in_range(block.column(n)) for n in times):
            return None
    built = HeldRows(known.root, known.schema, known.batch_id, known.at, doubles)
    rows = (built.rows(b, names, rules.failed_ids(b)) for b in blocks() if b.num_rows)
    write = file_writer(known.root, known.schema, [])
    return [file_entry(r) for out in write(rows) for r in out.to_pylist()]


_HELD_BLOCK = 65_536
"""Held rows read, turned into quarantine rows and written per block of this many."""


def _utc(spark: Any) -> bool:
    """Whether the session writes timestamps in UTC (`spark.sql.session.timeZone`)."""
    return spark.conf.get("spark.sql.session.timeZone") in ("UTC", "Etc/UTC")


def _with_files(
    paths: WritePaths,
    spark: Any,
    known: list[Any],
    known_rows: int,
    parts: list[DataFrame],
    batch_id: int,
    info: dict[str, Any],
) -> int:
    """The quarantine's commit when quarantine files were written without Spark
    (`known`, of `known_rows` rows: the tasks' known bad records, the held rows' built
    on the driver): those files and the files Spark writes of `parts`, in one commit
    with the batch's app transaction; the rows committed. Should the quarantine table
    be partitioned (the framework makes it unpartitioned), those rows are written again
    by Spark with the rest."""
    from streams.delta import append_files, arrow_schema, write_files
    from warehouse.quality.quarantine import QUARANTINE_SCHEMA
    from warehouse.runtime.write_paths import union

    target = paths.targets.target(quarantine=True)
    schema = arrow_schema(QUARANTINE_SCHEMA)
    rows = [0]

    def write(partition_by: list[str]) -> list[Any]:
        files: list[Any] = []
        frames = list(parts)
        if partition_by:
            root = target.path.rstrip("/")
            frames.append(
                spark.read.schema(QUARANTINE_SCHEMA).parquet(*[f"{root}/{f[0]}" for f in known])
            )
        else:
            files += known
            rows[0] += known_rows
        if frames:
            more = write_files(
                union(frames), target.path, schema, partition_by, target.unique_columns
            )
            rows[0] += sum(json.loads(f[3])["numRecords"] for f in more)
            files += more
        return files

    append_files(target, batch_id, schema, write, commit_info=info)
    return rows[0]
