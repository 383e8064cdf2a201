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
import functools
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import pyarrow as pa
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql.types import StructField, StructType

import streams.storage as storage
from streams.delta import (
    STAGING_DIR,
    DeltaTarget,
    FileEntry,
    append_files,
    arrow_schema,
    file_entry,
    write_files,
)
from streams.kafka import COORDINATES, KAFKA_COLUMNS, SCHEMA, parse_kafka, required_fields
from streams.landing.arrow_json import SPARK_TYPES, payload_schema
from streams.landing.errors import LandingConfigError
from streams.landing.rules import BadRecords, RowRules
from streams.landing.tasks import TaskSpec, run_task

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
    landing = _Landing(
        spark,
        target,
        payload,
        rows_struct,
        stage=storage.join(target.path, STAGING_DIR, f"kafka-json-{uuid.uuid4().hex}"),
        required=tuple(required),
        rules=rules,
        judge=judge,
    )
    task = functools.partial(
        TaskSpec,
        target.path,
        landing.stage,
        landing.table_schema,
        parsed_payload,
        tuple(required),
        unique_columns=tuple(target.unique_columns),
        rules=rules,
        known=known_bad,
    )

    clock: dict[str, float] = {}

    def write(partition_by: list[str]) -> list[FileEntry]:
        clock["tasks"], clock["epoch"] = time.perf_counter(), time.time()
        try:
            rows = _collect(spark, partitions, task(partition_by=tuple(partition_by)))
        except Exception as e:  # any task failure, a crashed Python worker included
            raise _TasksFailed(str(e)) from e
        clock["files"] = time.perf_counter()
        files = landing.files(rows, partition_by)
        clock["commit"] = time.perf_counter()
        _log_tasks(target, batch_id, rows, clock)
        return files

    try:
        try:
            version = append_files(
                target, batch_id, landing.table_schema, write, commit_info=commit_info
            )
            clock["done"] = time.perf_counter()
            if "commit" in clock:
                logger.info(
                    "Delta table %s: batch %d: Arrow fallback %.2fs, commit %.2fs",
                    target.name,
                    batch_id,
                    clock["commit"] - clock["files"],
                    clock["done"] - clock["commit"],
                )
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
        yield landing.outcome(version)
    finally:
        landing.close()


class _Landing:
    """What the driver gathers of one batch's tasks: their counts, the files they wrote
    and staged, and the fallback's parse and write (`files`); then `outcome`.

    Concurrency: the driver's thread of one `kafka_json_append`."""

    def __init__(
        self,
        spark: SparkSession,
        target: DeltaTarget,
        payload: StructType,
        rows_struct: StructType,
        *,
        stage: str,
        required: tuple[str, ...],
        rules: RowRules | None,
        judge: Callable[[DataFrame], DataFrame] | None,
    ) -> None:
        self.spark, self.target, self.payload = spark, target, payload
        self.rows_struct, self.stage, self.required = rows_struct, stage, required
        self.table_schema = arrow_schema(rows_struct)
        self.judge = judge
        self.size = rules.size if rules is not None else 0
        self.counts = _TaskCounts.zero(self.size)
        self.known_files: tuple[FileEntry, ...] = ()
        self.held: DataFrame | None = None
        self.held_paths: tuple[str, ...] = ()
        self.bad: DataFrame | None = None
        self.bad_seen: Observation | None = None
        self._cached: list[DataFrame] = []

    def files(self, rows: list[dict[str, Any]], partition_by: list[str]) -> list[FileEntry]:
        """The data files of the tasks' `rows` and of the fallback's write, to commit."""
        files = [file_entry(r) for r in rows if r["kind"] == "file"]
        self.counts = _TaskCounts.total([r for r in rows if r["kind"] == "counts"], self.size)
        self.known_files = tuple(file_entry(r) for r in rows if r["kind"] == "known")
        # The staged files' schemas are known: given, Spark reads them without a job
        # that infers them.
        held = [r["path"] for r in rows if r["kind"] == "held"]
        if held:
            self.held = self.spark.read.schema(self.rows_struct).parquet(*held)
            self.held_paths = tuple(held)
        staged = [r["path"] for r in rows if r["kind"] == "fallback"]
        if staged:
            files += self._fallback(staged, partition_by)
        return files

    def _fallback(self, staged: list[str], partition_by: list[str]) -> list[FileEntry]:
        """The records the tasks handed back, parsed by Spark: their good rows written
        (judged on the way, with `judge`), their bad rows kept for the caller."""
        self.bad_seen = Observation(f"wh_fallback_{uuid.uuid4().hex}")
        parsed = parse_kafka(
            self.spark.read.schema(_RAW_SCHEMA).parquet(*staged),
            format="json",
            schema=self.payload,
            required=self.required,
            persist=self._cache,
            observe=self.bad_seen,
        )
        good = parsed.good if self.judge is None else self.judge(parsed.good)
        target = self.target
        more = write_files(
            good, target.path, self.table_schema, partition_by, target.unique_columns
        )
        self.counts = self.counts.plus_written(sum(json.loads(f[3])["numRecords"] for f in more))
        self.bad = parsed.bad
        return more

    def _cache(self, frame: DataFrame) -> DataFrame:
        self._cached.append(frame.persist())
        return self._cached[-1]

    def outcome(self, version: int | None) -> KafkaJsonAppend:
        c = self.counts
        return KafkaJsonAppend(
            version,
            records=c.records,
            written=c.written,
            typed=c.typed,
            bad=self.bad,
            held=self.held,
            checked=c.checked,
            failed=c.failed,
            dropped=c.typed - c.task_written - c.held,
            held_rows=c.held,
            bad_seen=self.bad_seen,
            known_files=self.known_files,
            known_rows=c.known,
            held_paths=self.held_paths,
        )

    def close(self) -> None:
        """Release the fallback's persisted frames and the staged records."""
        for frame in reversed(self._cached):
            frame.unpersist()
        storage.remove(self.stage)


@dataclass(frozen=True)
class _TaskCounts:
    """The tasks' counts over a batch: records read, typed, written by the tasks (and by
    the fallback, `written`), held and known bad, and per rule checked and failed."""

    records: int
    typed: int
    task_written: int
    written: int
    held: int
    known: int
    checked: tuple[int, ...]
    failed: tuple[int, ...]

    @classmethod
    def zero(cls, size: int) -> _TaskCounts:
        return cls(0, 0, 0, 0, 0, 0, (0,) * size, (0,) * size)

    @classmethod
    def total(cls, counts: list[dict[str, Any]], size: int) -> _TaskCounts:
        written = sum(c["written"] for c in counts)
        return cls(
            records=sum(c["records"] for c in counts),
            typed=sum(c["typed"] for c in counts),
            task_written=written,
            written=written,
            held=sum(c["held"] for c in counts),
            known=sum(c["known"] for c in counts),
            checked=tuple(sum(c["checked"][i] for c in counts) for i in range(size)),
            failed=tuple(sum(c["failed"][i] for c in counts) for i in range(size)),
        )

    def plus_written(self, rows: int) -> _TaskCounts:
        return replace(self, written=self.written + rows)


def _log_tasks(
    target: DeltaTarget, batch_id: int, rows: list[dict[str, Any]], clock: dict[str, float]
) -> None:
    """One line of where the tasks' time went: the job's wall time, each task's parts
    (`TIMED`; the Parquet write is the task's time less the others), when its code
    began after the job's start and its process's CPU time; the files written; how many
    tasks ran in a Python worker that had run the path before (a warm-up's included),
    whose start and imports were paid already, and how many read Kafka with the column
    reader (the others with confluent-kafka's `Consumer`, at about twice the CPU)."""
    if not logger.isEnabledFor(logging.INFO):
        return
    counts = [r for r in rows if r["kind"] == "counts"]
    files = [r for r in rows if r["kind"] in ("file", "known")]
    parts = []
    for c in counts:
        s = c.get("seconds", {})
        rest = s.get("task", 0.0) - sum(v for k, v in s.items() if k != "task")
        split = " ".join(f"{k} {v:.2f}" for k, v in s.items() if k != "task")
        # When the task's Python code began, after the job's start: scheduling, the
        # executor's Python worker and the task's unpickling and imports.
        began = c.get("entered", clock["epoch"]) - clock["epoch"]
        parts.append(
            f"[{c['records']} rec, {split} write {rest:.2f} = {s.get('task', 0):.2f}s "
            f"from +{began:.2f}s, cpu {c.get('cpu', 0.0):.2f}s]"
        )
    logger.info(
        "Delta table %s: batch %d: %d Arrow task(s), job %.2fs: %s; %d file(s), %.1f MB; "
        "%d of %d task(s) in a started Python worker, %d read Kafka with the column reader",
        target.name,
        batch_id,
        len(counts),
        clock["files"] - clock["tasks"],
        " ".join(parts),
        len(files),
        sum(r["size"] for r in files) / 1e6,
        sum(bool(c.get("started")) for c in counts),
        len(counts),
        sum(c.get("reader") == "native" for c in counts),
    )


def _reason(e: BaseException) -> str:
    """The line that says what went wrong in a failed job's long message: the last
    `SomethingError: ...` line of the Python traceback Spark forwards, if any."""
    lines = [ln.strip() for ln in str(e.__cause__ or e).splitlines() if ln.strip()]
    named = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b.*", ln)]
    return (named or lines or [type(e).__name__])[-1 if named else 0][:300]


def _collect(
    spark: SparkSession, partitions: Sequence[Any], spec: TaskSpec
) -> list[dict[str, Any]]:
    if not partitions:
        return []
    sc = spark.sparkContext
    rdd = sc.parallelize(list(partitions), len(partitions))
    return rdd.mapPartitions(lambda parts: run_task(spec, parts)).collect()
