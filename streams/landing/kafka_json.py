"""Land Kafka JSON in a Delta table without a JVM row: read, parse and write in Arrow.

The general path (`parse_kafka` then `write_batch`) turns every record into a JVM row
twice over: Spark's `from_json` types it, Spark's Parquet writer writes it. For an
append of flat JSON (integers, numbers, strings, booleans, timestamps), this path does the same
work in Arrow, inside Spark tasks: each task reads one of the Kafka input partitions
Spark planned for the batch (`streams.landing.planned`), types the values with
`streams.landing.arrow_json.split_block` and writes Parquet with the sink's Arrow
writer; the driver commits every file in one Delta commit with the batch's app
transaction (`streams.delta.append_files`), exactly like `write_batch`.

Records Arrow does not type exactly as Spark would (`split_block`'s fallback) are
never dropped: the tasks stage them raw in Parquet under the table's staging
directory, and the driver parses those with `parse_kafka`, so their good rows join
the same commit (written by Spark) and their bad rows go back to the caller for
quarantine, with Spark's reasons. A table gets the same rows either way.

With `known_bad` (`streams.landing.rules.BadRecords`), the records whose bad row is
known without Spark (`split_block(explain=True)`: a null value, a value cut off, a
plainly typed row without a required field) skip that parse: the tasks write their
quarantine rows in files under the quarantine table's root, and the caller commits
those (`KafkaJsonAppend.known_files`) with its quarantine, after the table.

With `rules` (`streams.landing.rules.RowRules`, a table's row-level expectations), the
tasks also judge the rows Arrow typed before writing them: the rows a rule holds are
staged typed and come back as a Spark frame (`KafkaJsonAppend.held`) for the caller's
quarantine, and `judge` judges the good rows of Spark's parse of the fallback the same
way on the driver. Both commits of the caller (table, then quarantine) carry the
batch's app transaction, as on the general path.

If the tasks fail (a broker error, or a Python worker killed by a crash in Arrow's
C++ reader on some input nobody foresaw), nothing is committed: `kafka_json_append`
yields None and the caller parses the batch the general way. A poison record can
slow a batch down, never stop the table.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql.types import StructField, StructType

from streams.delta import (
    STAGING_DIR,
    DeltaTarget,
    FileEntry,
    append_files,
    arrow_schema,
    file_entry,
    file_writer,
    write_files,
)
from streams.kafka import COORDINATES, KAFKA_COLUMNS, SCHEMA, parse_kafka, required_fields
from streams.landing.arrow_json import SPARK_TYPES, payload_schema
from streams.landing.errors import LandingConfigError
from streams.landing.rules import BadRecords, RowRules

logger = logging.getLogger(__name__)

_COORDINATE_FIELDS = [StructField(c, SCHEMA[c.removeprefix("_")].dataType) for c in COORDINATES]
"""The coordinates with the types of the source columns they come from."""
_RAW_SCHEMA = StructType([SCHEMA[c] for c in KAFKA_COLUMNS])
"""The Kafka columns the tasks stage the fallback's records with."""


def arrow_payload(payload: StructType) -> pa.Schema | None:
    """The Arrow schema `split_block` parses `payload` with, or None when a field's type
    is not one Arrow types like Spark (then this path does not apply)."""
    return payload_schema([(f.name, f.dataType.simpleString()) for f in payload.fields])


class KafkaJsonAppend(NamedTuple):
    """What one batch did. `bad`: Spark's `bad` frame (`parse_kafka`) of the records
    Arrow handed back, for the caller's quarantine; `held`: the typed rows the `rules`
    held (payload fields and coordinates), for the same; both readable until the
    context ends. `checked`, `failed`: per rule, over the rows Arrow typed (the
    fallback's rows are the `judge` callback's); `dropped`: typed rows the rules
    neither kept nor held; `held_rows`: the rows of `held`; `bad_seen`: with `bad`, the
    `parse_kafka` observation whose `flagged` is the number of rows of `bad`, collected
    while the fallback's good rows were written (no job of its own); `known_files`,
    `known_rows`: the quarantine files the tasks wrote (`known_bad`), uncommitted, and
    their rows; `held_paths`: the staged files `held` reads."""

    version: int | None
    records: int
    written: int
    typed: int
    bad: DataFrame | None
    held: DataFrame | None = None
    checked: tuple[int, ...] = ()
    failed: tuple[int, ...] = ()
    dropped: int = 0
    held_rows: int = 0
    bad_seen: Observation | None = None
    known_files: tuple[FileEntry, ...] = ()
    known_rows: int = 0
    held_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Task:
    root: str
    stage: str
    table: pa.Schema
    payload: pa.Schema
    required: tuple[str, ...]
    partition_by: tuple[str, ...]
    unique_columns: tuple[str, ...]
    rules: RowRules | None = None
    known: BadRecords | None = None


class _Staged:
    """Record batches staged in one Parquet file under the stage directory, opened on
    the first batch."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.path: str | None = None
        self.rows = 0
        self._writer: Any = None

    def write(self, batch: pa.RecordBatch, schema: pa.Schema) -> None:
        import pyarrow.parquet as pq

        if self._writer is None:
            os.makedirs(self.stage, exist_ok=True)
            self.path = os.path.join(self.stage, f"{uuid.uuid4().hex}.parquet")
            self._writer = pq.ParquetWriter(self.path, schema)
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
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


def _run_task(spec: _Task, partitions: Iterator[Any]) -> Iterator[dict[str, Any]]:
    """One Spark task: read, type, judge, write; yields one dict per data file, one per
    staged file (the fallback, the held rows), one per quarantine file of known bad
    records and one with the counts."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from streams.delta import crash_point
    from streams.kafka import KAFKA_COLUMNS, SCHEMA_WITHOUT_HEADERS, read_partition
    from streams.landing.arrow_json import split_block

    crash_point("arrow_task")  # kills this Python worker: the tests' stand-in for a crash
    source = to_arrow_schema(SCHEMA_WITHOUT_HEADERS, timezone="UTC")
    raw = pa.schema([source.field(c) for c in KAFKA_COLUMNS])
    size = spec.rules.size if spec.rules is not None else 0
    counts: dict[str, Any] = {
        "kind": "counts",
        "records": 0,
        "typed": 0,
        "written": 0,
        "held": 0,
        "known": 0,
        "checked": [0] * size,
        "failed": [0] * size,
    }
    fallback, held = _Staged(spec.stage), _Staged(spec.stage)
    known = _Known(spec.known)

    def judged(rows: pa.RecordBatch) -> pa.RecordBatch:
        assert spec.rules is not None
        verdict = spec.rules.judge(rows)
        for i in range(size):
            counts["checked"][i] += verdict.checked[i]
            counts["failed"][i] += verdict.failed[i]
        hold = rows.filter(verdict.hold)
        if hold.num_rows:
            held.write(hold, hold.schema)
            counts["held"] += hold.num_rows
        return rows.filter(verdict.keep)

    def typed() -> Iterator[pa.RecordBatch]:
        for part in partitions:
            for batch in read_partition(part, source):
                counts["records"] += batch.num_rows
                out = split_block(
                    batch, spec.payload, spec.required, explain=spec.known is not None
                )
                if out.fallback.num_rows:
                    fallback.write(out.fallback, raw)
                if out.bad is not None:
                    counts["known"] += known.add(out.bad)
                rows = out.rows
                counts["typed"] += rows.num_rows
                if rows.num_rows and spec.rules is not None:
                    rows = judged(rows)
                if rows.num_rows:
                    counts["written"] += rows.num_rows
                    yield rows

    write = file_writer(spec.root, spec.table, spec.partition_by, spec.unique_columns)
    try:
        for files in write(typed()):
            for row in files.to_pylist():
                yield {"kind": "file", **row}
    finally:
        fallback.close()
        held.close()
    yield from known.close()
    if fallback.path is not None:
        yield {"kind": "fallback", "path": fallback.path}
    if held.path is not None:
        yield {"kind": "held", "path": held.path}
    yield counts


def _checked(target: DeltaTarget, payload: StructType) -> pa.Schema:
    """The Arrow schema of `payload` for `target`, or a `LandingConfigError` saying why
    this path cannot land it (callers ask `arrow_payload` first)."""
    name = target.table or target.path
    if target.mode != "append":
        raise LandingConfigError(
            f"Delta table `{name}`: `kafka_json_append` appends, but the target's mode is "
            f"`{target.mode}`. Write an `{target.mode}` table with "
            "`streams.delta.write_batch`.",
            table=target.table,
            path=target.path,
            field="mode",
        )
    parsed = arrow_payload(payload)
    if parsed is not None:
        return parsed
    kinds = ", ".join(f"`{k}`" for k in SPARK_TYPES)
    wrong = [
        f for f in payload.fields if payload_schema([(f.name, f.dataType.simpleString())]) is None
    ]
    if not wrong:
        raise LandingConfigError(
            f"Delta table `{name}`: the payload has no fields; give the JSON payload's "
            f"fields, each of type {kinds}.",
            table=target.table,
            path=target.path,
        )
    listed = ", ".join(f"`{f.name}` (`{f.dataType.simpleString()}`)" for f in wrong)
    raise LandingConfigError(
        f"Delta table `{name}`: payload field(s) {listed} have types Arrow does not parse "
        f"like Spark; this path takes {kinds}. Ask `arrow_payload(payload)` first and "
        "land such a payload with `parse_kafka` and `write_batch`.",
        table=target.table,
        path=target.path,
        field=wrong[0].name,
    )


class _TasksFailed(Exception):
    pass


@contextlib.contextmanager
def kafka_json_append(
    spark: SparkSession,
    partitions: Sequence[Any],
    target: DeltaTarget,
    batch_id: int,
    *,
    payload: StructType,
    required: Sequence[str] = (),
    commit_info: dict[str, Any] | None = None,
    rules: RowRules | None = None,
    judge: Callable[[DataFrame], DataFrame] | None = None,
    known_bad: BadRecords | None = None,
) -> Iterator[KafkaJsonAppend | None]:
    """Append the JSON records of `partitions` (`planned_partitions` of the batch) to
    the table of `target` (embedded engine, append mode) as batch `batch_id`.
    `required` and the fields `payload` declares not nullable must be present and
    non-null (`streams.kafka.required_fields`); records without one are quarantined
    by Spark's parse, with its reason.

    `rules` judge the rows Arrow types, in the tasks (module doc); `judge` takes the
    good rows of Spark's parse of the fallback and returns those to write (the
    caller keeps what it sets aside). Give both or neither. `known_bad`: the tasks
    write the quarantine rows of the records they know are bad (module doc); the
    caller commits `known_files` after the table.

    Yields the outcome, or None when the tasks failed and nothing was committed (the
    caller then writes the batch the general way). Staged records and cached frames
    are released when the context ends."""
    parsed_payload = _checked(target, payload)
    # A record without a required field is handed back to Spark, which quarantines it
    # with the same reason as on its own path; the columns stay nullable, as Spark's are.
    required = required_fields(payload, required)
    nullable = [StructField(f.name, f.dataType, True, f.metadata) for f in payload.fields]
    rows_struct = StructType([*nullable, *_COORDINATE_FIELDS])
    table_schema = arrow_schema(rows_struct)
    stage = os.path.join(target.path, STAGING_DIR, f"kafka-json-{uuid.uuid4().hex}")
    cached: list[DataFrame] = []
    seen: dict[str, Any] = {"records": 0, "typed": 0, "written": 0, "bad": None, "held": None}
    size = rules.size if rules is not None else 0

    def cache(frame: DataFrame) -> DataFrame:
        cached.append(frame.persist())
        return cached[-1]

    def write(partition_by: list[str]) -> list[FileEntry]:
        spec = _Task(
            target.path,
            stage,
            table_schema,
            parsed_payload,
            tuple(required),
            tuple(partition_by),
            tuple(target.unique_columns),
            rules,
            known_bad,
        )
        try:
            rows = _collect(spark, partitions, spec)
        except Exception as e:  # any task failure, a crashed Python worker included
            raise _TasksFailed(str(e)) from e
        files = [file_entry(r) for r in rows if r["kind"] == "file"]
        counts = [r for r in rows if r["kind"] == "counts"]
        seen["records"] = sum(c["records"] for c in counts)
        seen["typed"] = sum(c["typed"] for c in counts)
        seen["written"] = sum(c["written"] for c in counts)
        seen["held_rows"] = sum(c["held"] for c in counts)
        seen["known_rows"] = sum(c["known"] for c in counts)
        seen["known_files"] = tuple(file_entry(r) for r in rows if r["kind"] == "known")
        seen["dropped"] = seen["typed"] - seen["written"] - seen["held_rows"]
        seen["checked"] = tuple(sum(c["checked"][i] for c in counts) for i in range(size))
        seen["failed"] = tuple(sum(c["failed"][i] for c in counts) for i in range(size))
        # The staged files' schemas are known: given, Spark reads them without a job
        # that infers them.
        held = [r["path"] for r in rows if r["kind"] == "held"]
        if held:
            seen["held"] = spark.read.schema(rows_struct).parquet(*held)
            seen["held_paths"] = tuple(held)
        staged = [r["path"] for r in rows if r["kind"] == "fallback"]
        if staged:
            seen["bad_seen"] = Observation(f"wh_fallback_{uuid.uuid4().hex}")
            parsed = parse_kafka(
                spark.read.schema(_RAW_SCHEMA).parquet(*staged),
                format="json",
                schema=payload,
                required=required,
                persist=cache,
                observe=seen["bad_seen"],
            )
            good = parsed.good if judge is None else judge(parsed.good)
            more = write_files(good, target.path, table_schema, partition_by, target.unique_columns)
            files += more
            seen["written"] += sum(json.loads(f[3])["numRecords"] for f in more)
            seen["bad"] = parsed.bad
        return files

    try:
        try:
            version = append_files(target, batch_id, table_schema, write, commit_info=commit_info)
        except _TasksFailed as e:
            logger.warning(
                "Delta table %s: batch %d: the Arrow tasks failed (%s); nothing was "
                "committed, the batch is parsed by Spark instead",
                target.name,
                batch_id,
                _reason(e),
            )
            yield None
            return
        yield KafkaJsonAppend(
            version,
            seen["records"],
            seen["written"],
            seen["typed"],
            seen["bad"],
            seen["held"],
            seen.get("checked", (0,) * size),
            seen.get("failed", (0,) * size),
            seen.get("dropped", 0),
            seen.get("held_rows", 0),
            seen.get("bad_seen"),
            seen.get("known_files", ()),
            seen.get("known_rows", 0),
            seen.get("held_paths", ()),
        )
    finally:
        for frame in reversed(cached):
            frame.unpersist()
        shutil.rmtree(stage, ignore_errors=True)


def _reason(e: BaseException) -> str:
    """The line that says what went wrong in a failed job's long message: the last
    `SomethingError: ...` line of the Python traceback Spark forwards, if any."""
    lines = [ln.strip() for ln in str(e.__cause__ or e).splitlines() if ln.strip()]
    named = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b.*", ln)]
    return (named or lines or [type(e).__name__])[-1 if named else 0][:300]


def _collect(spark: SparkSession, partitions: Sequence[Any], spec: _Task) -> list[dict[str, Any]]:
    if not partitions:
        return []
    sc = spark.sparkContext
    rdd = sc.parallelize(list(partitions), len(partitions))
    return rdd.mapPartitions(lambda parts: _run_task(spec, parts)).collect()
