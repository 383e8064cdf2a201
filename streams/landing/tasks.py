"""What runs in Spark's tasks on the landing path: each task reads its Kafka input
partitions, types the values in Arrow (`streams.landing.arrow_json.split_block`),
judges the typed rows (`RowRules`), writes Parquet with the sink's Arrow writer, and
stages what it hands back: the records Arrow does not type as Spark would (the
fallback), the rows the rules hold, and the quarantine files of the records it knows
are bad (`BadRecords`). `kafka_json_append` (`streams.landing.kafka_json`) runs
`run_task` in each task and commits what they wrote.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

import streams.storage as storage
from streams._worker_gc import freeze_imports
from streams.delta import file_writer
from streams.landing.rules import BadRecords, RowRules

TIMED = ("fetch", "type", "judge", "stage", "task")
"""The parts of a task's time its counts carry (`seconds`)."""

_ran = 0
"""Landing tasks and warm-ups this Python worker ran. Spark reuses a worker for its
executor's next Python task, so only a worker's first one pays its start and imports.
One task at a time per worker."""


def warm_up(carried: object) -> bool:
    """A warm-up task (`streams.landing.reach.warm_up`): this module and what it imports
    are imported, and `carried` (objects a batch's tasks get, so that their modules are
    imported too) was unpickled, by the time this runs. Whether the worker had run
    one before."""
    global _ran
    del carried
    freeze_imports()
    _ran += 1
    return _ran > 1


@dataclass(frozen=True)
class TaskSpec:
    """What every task of one batch needs: the table's root and staging folder, the
    Arrow schemas of its rows and of the payload, the required fields, the partition and
    unique columns of its writer, the rules and the known-bad writer (None: none), and
    the driver's storage section (`streams.storage.overrides`), which an executor on
    another machine has no other way to get."""

    root: str
    stage: str
    table: pa.Schema
    payload: pa.Schema
    required: tuple[str, ...]
    partition_by: tuple[str, ...]
    unique_columns: tuple[str, ...]
    rules: RowRules | None = None
    known: BadRecords | None = None
    storage_settings: dict[str, Any] = field(default_factory=storage.overrides)


class _Staged:
    """Record batches staged in one Parquet file under the stage directory, opened on
    the first batch."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.path: str | None = None
        self.rows = 0
        self._writer: Any = None
        self._sink: Any = None

    def write(self, batch: pa.RecordBatch, schema: pa.Schema) -> None:
        import pyarrow.parquet as pq

        if self._writer is None:
            self.path = storage.join(self.stage, f"{uuid.uuid4().hex}.parquet")
            fs, path = storage.current().filesystem(self.path)
            if storage.is_local(self.stage):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            self._sink = fs.open_output_stream(path)
            self._writer = pq.ParquetWriter(self._sink, schema)
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = None


class _Known:
    """The quarantine rows of a task's known bad records (`BadRecords`), written in files
    of their own once they reach `FLUSH_BYTES`, and when the task ends."""

    FLUSH_BYTES = 64 << 20

    def __init__(self, known: BadRecords | None) -> None:
        self.known = known
        self.pending: list[pa.RecordBatch] = []
        self.pending_bytes = 0
        self.files: list[dict[str, Any]] = []

    def add(self, bad: pa.RecordBatch) -> int:
        """Takes the rows of `bad` (`BAD_COLUMNS`); how many."""
        if self.known is None or not bad.num_rows:
            return 0
        rows = self.known.rows(bad)
        self.pending.append(rows)
        self.pending_bytes += rows.nbytes
        if self.pending_bytes >= self.FLUSH_BYTES:
            self._write()
        return bad.num_rows

    def close(self) -> list[dict[str, Any]]:
        """One dict per file written (`kind` "known" and `file_writer`'s columns)."""
        self._write()
        return self.files

    def _write(self) -> None:
        if self.known is None or not self.pending:
            return
        write = file_writer(self.known.root, self.known.schema, [])
        for files in write(iter(self.pending)):
            self.files.extend({"kind": "known", **row} for row in files.to_pylist())
        self.pending.clear()
        self.pending_bytes = 0


def run_task(spec: TaskSpec, partitions: Iterator[Any]) -> Iterator[dict[str, Any]]:
    """One Spark task: read, type, judge, write; yields one dict per data file, one per
    staged file (the fallback, the held rows), one per quarantine file of known bad
    records and one with the counts."""
    from streams.delta import crash_point

    global _ran
    entered = time.time()  # wall clock, set against the driver's: the task's start-up
    freeze_imports()
    started, _ran = _ran > 0, _ran + 1
    crash_point("arrow_task")  # kills this Python worker: the tests' stand-in for a crash
    with storage.configured(spec.storage_settings):
        task = _TaskRun(spec)
        task.counts["entered"] = entered
        task.counts["started"] = started  # the worker had run a landing task or warm-up
        yield from task.run(partitions)


class _TaskRun:
    """One task's read, type, judge and write, and its counts (one task, one thread)."""

    def __init__(self, spec: TaskSpec) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        from streams.kafka import KAFKA_COLUMNS, SCHEMA_WITHOUT_HEADERS

        self.spec = spec
        self.source = to_arrow_schema(SCHEMA_WITHOUT_HEADERS, timezone="UTC")
        self.raw = pa.schema([self.source.field(c) for c in KAFKA_COLUMNS])
        size = spec.rules.size if spec.rules is not None else 0
        self.counts: dict[str, Any] = {
            "kind": "counts",
            "records": 0,
            "typed": 0,
            "written": 0,
            "held": 0,
            "known": 0,
            "checked": [0] * size,
            "failed": [0] * size,
            # Seconds of the task's parts: Kafka fetch, typing, rules, staging the
            # fallback, held and known rows; `task` whole (the Parquet write is the rest).
            "seconds": dict.fromkeys(TIMED, 0.0),
        }
        self.fallback, self.held = _Staged(spec.stage), _Staged(spec.stage)
        self.known = _Known(spec.known)

    def run(self, partitions: Iterator[Any]) -> Iterator[dict[str, Any]]:
        spec = self.spec
        seconds = self.counts["seconds"]
        start, cpu = time.perf_counter(), time.process_time()
        write = file_writer(spec.root, spec.table, spec.partition_by, spec.unique_columns)
        written: list[dict[str, Any]] = []
        try:
            for files in write(self._typed(partitions)):
                written += ({"kind": "file", **row} for row in files.to_pylist())
        finally:
            self.fallback.close()
            self.held.close()
        t = time.perf_counter()
        known = self.known.close()
        seconds["stage"] += time.perf_counter() - t
        seconds["task"] = time.perf_counter() - start
        self.counts["cpu"] = time.process_time() - cpu  # librdkafka's threads included
        yield from written
        yield from known
        if self.fallback.path is not None:
            yield {"kind": "fallback", "path": self.fallback.path}
        if self.held.path is not None:
            yield {"kind": "held", "path": self.held.path}
        yield self.counts

    def _typed(self, partitions: Iterator[Any]) -> Iterator[pa.RecordBatch]:
        """The rows to write, block by block: typed by Arrow, judged by the rules."""
        from streams.kafka import partition_reader, read_partition
        from streams.landing.arrow_json import split_block

        spec, counts = self.spec, self.counts
        seconds = counts["seconds"]
        clock = time.perf_counter
        for part in partitions:
            counts["reader"] = partition_reader(part)
            blocks = read_partition(part, self.source)
            while True:
                t0 = clock()
                batch = next(blocks, None)
                t1 = clock()
                seconds["fetch"] += t1 - t0
                if batch is None:
                    break
                counts["records"] += batch.num_rows
                out = split_block(
                    batch, spec.payload, spec.required, explain=spec.known is not None
                )
                t2 = clock()
                seconds["type"] += t2 - t1
                if out.fallback.num_rows:
                    self.fallback.write(out.fallback, self.raw)
                if out.bad is not None:
                    counts["known"] += self.known.add(out.bad)
                t3 = clock()
                seconds["stage"] += t3 - t2
                rows = out.rows
                counts["typed"] += rows.num_rows
                if rows.num_rows and spec.rules is not None:
                    rows = self._judged(rows, spec.rules)
                seconds["judge"] += clock() - t3
                if rows.num_rows:
                    counts["written"] += rows.num_rows
                    yield rows

    def _judged(self, rows: pa.RecordBatch, rules: RowRules) -> pa.RecordBatch:
        """The rows the rules keep; the rows they hold are staged."""
        verdict = rules.judge(rows)
        counts = self.counts
        for i in range(rules.size):
            counts["checked"][i] += verdict.checked[i]
            counts["failed"][i] += verdict.failed[i]
        hold = rows.filter(verdict.hold)
        if hold.num_rows:
            self.held.write(hold, hold.schema)
            counts["held"] += hold.num_rows
        return rows.filter(verdict.keep)
