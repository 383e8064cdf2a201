"""The Arrow write strategy: one batch through `streams.landing`, with the table's row
expectations.

The tasks read, type, judge (`warehouse.quality.arrow_rows`, when the table has
row-level expectations) and write in Arrow; then, on the driver:

- the records Arrow handed back are parsed by Spark and their good rows judged as they
  are written (`RowChecks.observe`: no extra job), their bad rows quarantined;
- the records the tasks knew were bad (a null value, a value cut off, a plainly typed
  row without a required field) were not handed back: the tasks wrote their quarantine
  rows (`warehouse.quality.arrow_quarantine`) in files that join the quarantine's
  commit;
- the held rows (typed by Arrow, failing a `quarantine` expectation) become quarantine
  rows with the reasons and `row` of Spark's path, built in Arrow here and written in a
  file that joins the quarantine's commit (`arrow_files`), or, where that cannot write
  them as Spark does, by Spark (`RowChecks.quarantined`);
- the quarantine is committed after the table, both with the batch's app transaction,
  and the quality events carry both sides' counts. Its rows are counted by what already
  ran (the tasks' counts, the observations of the fallback's write), not by a job.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from warehouse.write.arrow_files import commit_quarantine, held_quarantine_files
from warehouse.write.context import BatchContext, Outcome, observed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streams.delta import FileEntry
    from streams.landing import KafkaJsonAppend
    from warehouse.compile.program import TableProgram
    from warehouse.compile.strategy import ArrowLanding
    from warehouse.quality.arrow_quarantine import ParseErrorRows
    from warehouse.quality.rows import RowChecks

logger = logging.getLogger(__name__)


def rows_schema(payload: Any) -> Any:
    """The Spark schema of the Arrow path's typed rows: the payload (a StructType), then
    the Kafka coordinates (the columns the row checks compile against)."""
    from pyspark.sql.types import StructField, StructType

    from streams.kafka import COORDINATES, SCHEMA

    coords = [StructField(c, SCHEMA[c.removeprefix("_")].dataType) for c in COORDINATES]
    return StructType([*payload.fields, *coords])


@dataclass
class _Quarantine:
    """The quarantine a batch gathers: Spark frames, files written without Spark, and
    the rows of both while every part's count is known (`rows` None: count them)."""

    parts: list[DataFrame] = field(default_factory=list)
    files: list[FileEntry] = field(default_factory=list)
    file_rows: int = 0
    rows: int | None = 0

    def add(self, part: DataFrame, rows: int | None) -> None:
        self.parts.append(part)
        self.rows = None if self.rows is None or rows is None else self.rows + rows


@dataclass
class _Counts:
    """The per-expectation counts of the whole batch and the rows dropped."""

    checked: list[int]
    failed: list[int]
    dropped: int

    def add(self, metrics: list[dict[str, Any]], dropped: int) -> None:
        self.checked = [a + m["checked"] for a, m in zip(self.checked, metrics, strict=True)]
        self.failed = [a + m["failed"] for a, m in zip(self.failed, metrics, strict=True)]
        self.dropped += dropped


class ArrowWrite:
    """Writes a batch of its Kafka JSON append table through Arrow; leaves to the next
    strategy a replay, a batch whose ranges are not readable from the plan, or one whose
    tasks failed (nothing committed then).

    Concurrency: query thread only, one batch at a time."""

    name = "Arrow"

    def __init__(self, program: TableProgram) -> None:
        assert program.arrow is not None
        self.program = program
        self.landing: ArrowLanding = program.arrow
        self.checks: RowChecks | None = program.checks if self.landing.rules is not None else None

    def write(self, batch: BatchContext) -> Outcome | None:
        from streams.delta import arrow_schema
        from streams.landing import kafka_json_append, planned_partitions
        from warehouse.quality.arrow_quarantine import ParseErrorRows
        from warehouse.quality.quarantine import QUARANTINE_SCHEMA

        if batch.replay:
            return None
        partitions = planned_partitions(batch.df, self.landing.fetch)
        if partitions is None:
            return None
        if self.landing.warm is not None:
            self.landing.warm.wait()  # its tasks hold the executors' cores until it ends
        judged: list[tuple[DataFrame, Any]] = []  # the fallback's good rows, their Observation
        known = ParseErrorRows(
            self.program.targets.quarantine().path,
            arrow_schema(QUARANTINE_SCHEMA),
            batch.batch_id,
            datetime.now(UTC),
        )
        with kafka_json_append(
            batch.spark,
            partitions,
            self.program.targets.main(),
            batch.batch_id,
            payload=self.landing.payload,
            commit_info=batch.info,
            rules=self.landing.rules,
            judge=self._judge(batch, judged) if self.checks is not None else None,
            known_bad=known,
        ) as done:
            if done is None:
                return None
            return self._after(batch, done, judged, known)

    def _judge(self, batch: BatchContext, judged: list[tuple[DataFrame, Any]]) -> Any:
        """The `judge` of `kafka_json_append`: the fallback's good rows judged as they are
        written, their `Observation` kept in `judged`."""
        from pyspark.sql import Observation

        checks = self.checks
        assert checks is not None

        def judge(good: DataFrame) -> DataFrame:
            seen = Observation(f"wh_arrow_{batch.table}_{batch.batch_id}_{uuid.uuid4().hex[:8]}")
            judged.append((good, seen))
            return checks.observe(good, seen)

        return judge

    def _after(
        self,
        batch: BatchContext,
        done: KafkaJsonAppend,
        judged: list[tuple[DataFrame, Any]],
        known: ParseErrorRows,
    ) -> Outcome:
        """The quarantine and quality events of a batch the tasks landed (`done`)."""
        q = _Quarantine(files=list(done.known_files), file_rows=done.known_rows)
        if done.bad is not None:
            bad = observed(done.bad_seen)
            q.add(batch.parse_quarantine(done.bad), None if bad is None else int(bad["flagged"]))
        if done.held is not None:
            self._held(batch, done, q, known)
        counts = _Counts(list(done.checked), list(done.failed), done.dropped)
        cached = self._fallback_rows(batch, judged, q, counts)
        try:
            if q.files:
                quarantined = commit_quarantine(batch, q.files, q.file_rows, q.parts)
            elif q.parts:
                quarantined = batch.write_quarantine(q.parts, rows=q.rows)
            else:
                quarantined = 0
        finally:
            for whole in cached:
                whole.unpersist()
        if self.checks is not None:
            batch.record_quality(
                self.checks.counted_metrics(
                    counts.checked, counts.failed, table=batch.table, batch_id=batch.batch_id
                )
            )
        logger.debug(
            "table %s: batch %d: %d of %d records typed by Arrow",
            batch.table,
            batch.batch_id,
            done.typed,
            done.records,
        )
        return Outcome(done.records, done.written, quarantined, counts.dropped, done.version)

    def _held(
        self, batch: BatchContext, done: KafkaJsonAppend, q: _Quarantine, known: ParseErrorRows
    ) -> None:
        """The held rows' quarantine: files built on the driver, else Spark's rows."""
        assert self.landing.rules is not None and self.checks is not None and done.held is not None
        files = held_quarantine_files(
            batch.spark, done.held_paths, self.landing.rules, self.landing.payload, known
        )
        if files is None:
            q.add(self.checks.quarantined(done.held, batch_id=batch.batch_id), done.held_rows)
        else:
            q.files += files
            q.file_rows += done.held_rows

    def _fallback_rows(
        self,
        batch: BatchContext,
        judged: list[tuple[DataFrame, Any]],
        q: _Quarantine,
        counts: _Counts,
    ) -> list[Any]:
        """The counts and quarantine of the fallback's good rows, judged while written; rows
        whose write reported no counts are judged again, whole (returned, to unpersist
        once the quarantine is written)."""
        checks = self.checks
        cached = []
        for good, seen in judged:
            assert checks is not None
            c = observed(seen)
            if c is None:
                logger.warning(
                    "table %s: batch %d: the fallback's write reported no counts; "
                    "judging its rows again",
                    batch.table,
                    batch.batch_id,
                )
                whole = checks.apply(good, table=batch.table, batch_id=batch.batch_id)
                cached.append(whole)
                if whole.quarantine is not None:
                    q.add(whole.quarantine, None)
                counts.add(whole.metrics, whole.dropped)
            else:
                if c["quarantined"]:
                    q.add(checks.quarantined(good, batch_id=batch.batch_id), int(c["quarantined"]))
                counts.add(
                    checks.observed_metrics(c, table=batch.table, batch_id=batch.batch_id),
                    int(c["removed"]) - int(c["quarantined"]),
                )
        return cached
