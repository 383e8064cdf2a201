"""A compiled table as a running Structured Streaming query.

`build_query` compiles the table (`warehouse.compile.build_program`) with the snapshots
this session keeps, and gives its program a `BatchWriter`; `TableQuery.start` starts
the program's stream with the writer as its foreachBatch function.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.compile.program import TableProgram, build_program, snapshot_tables
from warehouse.runtime.snapshots import SnapshotCache, kept_snapshot
from warehouse.runtime.writer import BatchWriter
from warehouse.spec.expectations import interval_seconds

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from warehouse.compile.engines import ResolvedEngines
    from warehouse.compile.plan import TablePlan
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)

NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
POLLING_DELAY = "spark.sql.streaming.pollingDelay"
WAITING_POLLING_DELAY = "100ms"
"""The polling delay of a query whose source waits for new input
(`TableProgram.waits_for_input`): the wait is where an idle trigger spends its time,
and input that comes in the delay after it starts its batch at most this much later."""
FACTORY_MODE = "spark.sql.codegen.factoryMode"
"""How Spark evaluates expressions outside whole-stage code: generated classes (its
default, falling back to interpreting them) or `NO_CODEGEN` (interpreted)."""


def query_settings(program: TableProgram) -> dict[str, str]:
    """The Spark settings of `program`'s query alone, over its session's: no batches
    without new input unless the query can emit in one (`no_data_batches`),
    expressions interpreted where a watermark evicts a dedupe's state (`interpreted`,
    decision 0047), and a short polling delay where the source waits for new input
    (`waits_for_input`, decision 0072). Whole-stage code generation stays on
    either way."""
    settings = {}
    if not program.no_data_batches:
        settings[NO_DATA_BATCHES] = "false"
    if program.interpreted:
        settings[FACTORY_MODE] = "NO_CODEGEN"
    if program.waits_for_input:
        settings[POLLING_DELAY] = WAITING_POLLING_DELAY
    return settings


@dataclass
class TableQuery:
    """A table's program, its writer, and the snapshots it keeps; `start` starts it.

    Concurrency: the runner's thread starts, refreshes and releases it; Spark's query
    thread calls `writer`."""

    program: TableProgram
    writer: BatchWriter
    snapshots: SnapshotCache | None = None

    @property
    def plan(self) -> TablePlan:
        return self.program.plan

    def start(self) -> StreamingQuery:
        """Start the query: remove what an interrupted batch left in the checkpoint, then
        the program's stream with the writer as foreachBatch, its checkpoint, output mode
        and trigger."""
        from streams.delta import remove_interrupted_writes

        program, plan = self.program, self.program.plan
        logger.info("table %s: starting query (checkpoint %s)", plan.name, plan.checkpoint_path)
        remove_interrupted_writes(plan.checkpoint_path)
        writer = (
            program.stream.writeStream.queryName(f"warehouse_{plan.name}")
            .option("checkpointLocation", plan.checkpoint_path)
            .outputMode(plan.output_mode)
            .foreachBatch(self.writer.function(program.stream))
        )
        interval = program.definition.spec.trigger and program.definition.spec.trigger.interval
        if program.once:
            writer = writer.trigger(availableNow=True)
        elif interval:
            writer = writer.trigger(processingTime=interval)
        settings = query_settings(program)
        if not settings:
            return writer.start()
        # The query reads its settings from a copy of the session made by start():
        # set for this start only (the runner starts one query at a time).
        conf = program.stream.sparkSession.conf
        before = {key: conf.get(key, None) for key in settings}
        for key, value in settings.items():
            conf.set(key, value)
        try:
            return writer.start()
        finally:
            for key, value in before.items():
                if value is None:
                    conf.unset(key)
                else:
                    conf.set(key, value)

    def refresh_snapshots(self) -> None:
        """Read the snapshots the table keeps again once older than their `max_age` (the
        runner calls it while the query runs); nothing without `snapshots`."""
        if self.snapshots is not None:
            self.snapshots.refresh()

    def release(self, spark: SparkSession) -> None:
        """Once the query has stopped: the writer's clients, the kept snapshots and the
        program's views."""
        self.writer.close()
        if self.program.wake_file is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.program.wake_file)
        if self.snapshots is not None:
            self.snapshots.release()
        for view in self.program.views:
            spark.catalog.dropTempView(view)


def build_query(
    project: LoadedProject,
    table: str,
    spark: SparkSession,
    *,
    engines: ResolvedEngines,
    once: bool,
    bootstrap: str | None,
    writer: Callable[[TableProgram], BatchWriter],
) -> TableQuery:
    """Compile `table` and give it its writer (`writer(program)`). A table with
    `snapshots: {max_age}` reads the copies this session keeps, cached last, so that
    nothing is left cached if the build fails before."""
    spec = project.tables[table].spec
    kept = {}
    if spec.snapshots is not None:
        kept = {
            name: kept_snapshot(spark, str(project.table_path(name)), engine=engines.delta.name)
            for name in snapshot_tables(project, table)
        }
    program = build_program(
        project,
        table,
        spark,
        engines=engines,
        once=once,
        bootstrap=bootstrap,
        snapshots={name: k.frame for name, k in kept.items()},
    )
    snapshots = None
    if spec.snapshots is not None and kept:
        snapshots = SnapshotCache(table, kept, interval_seconds(spec.snapshots.max_age))
    return TableQuery(program, writer(program), snapshots)
