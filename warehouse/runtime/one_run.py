"""One run of a compiled table outside a `Pipeline`: what `warehouse test` runs.

`run_batch` hands one static batch to the table's `BatchWriter`, as `foreachBatch`
hands it a micro-batch (a Kafka-sourced table's records: its parse, transform, checks
and write strategies all run per batch). `run_until_done` starts the table's query
(`TableQuery.start`, with the program's `availableNow` trigger) and waits until it has
processed what its inputs hold (a table-sourced table's watermark, transform and
stateful operators are part of its stream). Neither takes the project's locks nor
publishes: the caller gives a program that writes to a throwaway root and has no
publish target.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING

import streams.storage as storage
from warehouse.errors import root_cause_line
from warehouse.runtime.errors import QueryFailedError
from warehouse.runtime.query import TableQuery
from warehouse.runtime.writer import BatchStats, BatchWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from warehouse.compile.program import TableProgram

logger = logging.getLogger(__name__)

_POLL_SECONDS = 0.2


def new_checkpoint(path: str) -> str:
    """Start a checkpoint at `path` as a query's start does: its `metadata` file with a new
    query id (the table's commits name their app transaction by it). The query id."""
    query_id = str(uuid.uuid4())
    storage.write_text(storage.join(path, "metadata"), json.dumps({"id": query_id}) + "\n")
    return query_id


def run_batch(
    program: TableProgram, frame: DataFrame, *, session: SparkSession, batch_id: int = 0
) -> BatchStats:
    """`frame` as batch `batch_id` of `program`, through its `BatchWriter`; its counts.
    The program's checkpoint must have a query id (`new_checkpoint`)."""
    writer = BatchWriter(program, session=session)
    try:
        writer(frame, batch_id)
    finally:
        writer.close()
    return writer.stats


def run_until_done(program: TableProgram, *, session: SparkSession) -> BatchStats:
    """Start `program`'s query (built with `once=True`) and wait until it has processed
    what its inputs hold; its counts. A batch that fails with one of the framework's own
    errors stops the query and is raised; any other failure as a `QueryFailedError`."""
    from pyspark.errors import StreamingQueryException

    query = TableQuery(program, BatchWriter(program, session=session))
    running = query.start()
    try:
        while True:
            try:
                if running.awaitTermination(_POLL_SECONDS):
                    break
            except StreamingQueryException:
                break  # read below, from the writer or the query
            if query.writer.failed.is_set():
                running.stop()
    finally:
        if running.isActive:
            running.stop()
        query.release(session)
    error = query.writer.stats.error
    if error is not None:
        raise error
    failure = running.exception()
    if failure is not None:
        raise QueryFailedError(
            f"Table `{program.name}`: its query failed: {root_cause_line(str(failure))}",
            table=program.name,
            layer=program.definition.layer,
        )
    return query.writer.stats
