"""Running table tests: each test's table compiled and run once over its fixtures.

Everything is written under a throwaway folder (`workdir`), never the project's root,
and no broker is needed:

- an input table of a test (a table it reads, or one its SQL reads as a snapshot) is
  first made empty as its own program writes it, by running that program over an
  empty batch in a scratch root (its inputs made empty first, down to the topics), so
  the table has the schema, properties and sink columns a run gives it; a test gets a
  copy and its `given` rows appended, typed by that schema;
- a Kafka-sourced table gets its `given` records as one batch of Kafka records, handed
  to its `BatchWriter` as `foreachBatch` would hand it a micro-batch: the same parse,
  transform, checks and write strategies as `warehouse run` (a batch of records not
  planned by a Kafka source goes one pass or cached, as one the Arrow path leaves does);
- a table-sourced table runs as its own query, `availableNow`, reading its inputs'
  Delta tables as streams: its watermark, transform and stateful operators are those of
  `warehouse run`.

The program is the one `warehouse.compile.build_program` makes for `warehouse run`,
without its publish target (a test reads the table, not a topic).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.compile import KafkaInput, build_program
from warehouse.errors import known_errors, root_cause_line
from warehouse.runtime import new_checkpoint, run_batch, run_until_done
from warehouse.spec.errors import Problem
from warehouse.spec.loader import field_path
from warehouse.spec.paths import table_exists
from warehouse.testing.errors import TableTestFileError
from warehouse.testing.load import LoadedTest, inputs
from warehouse.testing.rows import collected, difference, shown, typed_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from warehouse.compile.engines import ResolvedEngines
    from warehouse.compile.program import TableProgram
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)

NO_BROKER = "warehouse-test.invalid:9092"
"""The bootstrap a tested table compiles with: its records never come from a broker."""


@dataclass
class Comparison:
    """Expected against actual rows of one table, on `columns`."""

    columns: list[str]
    missing: list[tuple[Any, ...]]
    unexpected: list[tuple[Any, ...]]

    @property
    def equal(self) -> bool:
        return not self.missing and not self.unexpected


@dataclass
class TestResult:
    """What one test found: the table's rows, its quarantine (None when not expected),
    or the error that stopped the run."""

    test: LoadedTest
    rows: Comparison | None = None
    quarantine: Comparison | None = None
    quarantine_count: tuple[int, int] | None = None
    """(expected, actual) when `expect.quarantine` is a count."""
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        if self.error is not None or self.rows is None or not self.rows.equal:
            return False
        if self.quarantine is not None and not self.quarantine.equal:
            return False
        return self.quarantine_count is None or (
            self.quarantine_count[0] == self.quarantine_count[1]
        )

    def report(self) -> list[str]:
        """The lines that say what differed (none when it passed)."""
        lines: list[str] = []
        if self.error is not None:
            lines.append(f"  error: {self.error}")
        for what, c in (("rows", self.rows), ("quarantine rows", self.quarantine)):
            if c is None or c.equal:
                continue
            lines += _listed(f"missing {what} (expected, not in the table)", c, c.missing)
            lines += _listed(f"unexpected {what} (in the table, not expected)", c, c.unexpected)
        if self.quarantine_count and self.quarantine_count[0] != self.quarantine_count[1]:
            want, got = self.quarantine_count
            lines.append(f"  quarantine: expected {want} rows, got {got}")
        return lines


def _listed(title: str, c: Comparison, rows: list[tuple[Any, ...]]) -> list[str]:
    return [f"  {title}:", *(f"    {shown(c.columns, r)}" for r in rows)] if rows else []


@dataclass
class TableTestRunner:
    """Runs tests of `project` on `spark` with `engines`, under `workdir` (a local folder
    it owns). Concurrency: one thread."""

    project: LoadedProject
    spark: SparkSession
    engines: ResolvedEngines
    workdir: Path
    _empty: set[str] = field(default_factory=set)
    _runs: int = 0

    def run(
        self, tests: Sequence[LoadedTest], *, progress: Callable[[TestResult], None] | None = None
    ) -> list[TestResult]:
        """Run `tests` one after another, each in its own root under `workdir`; `progress`
        gets each result as it is known. A malformed test raises `TableTestFileError`."""
        out = []
        for test in tests:
            result = self.run_one(test)
            out.append(result)
            if progress is not None:
                progress(result)
        return out

    def run_one(self, test: LoadedTest) -> TestResult:
        """Run one test: its result, with the error that stopped its table if one did."""
        started = time.monotonic()
        self._runs += 1
        project = self._at(self.workdir / f"test-{self._runs}")
        result = TestResult(test)
        try:
            self._run(project, test, result)
        except TableTestFileError:
            raise
        except known_errors() as e:
            result.error = str(e)
        except Exception as e:  # a failing table fails its own test, not the others
            logger.debug("test %s failed", test.name, exc_info=True)
            result.error = root_cause_line(e)
        result.seconds = time.monotonic() - started
        return result

    # -- one test ------------------------------------------------------------

    def _run(self, project: LoadedProject, test: LoadedTest, result: TestResult) -> None:
        t = test.test
        tables, _ = inputs(self.project, self.project.tables[t.table])
        for name in tables:
            self._given_table(project, test, name)
        program = self._program(project, t.table)
        try:
            if program.reads_kafka:
                new_checkpoint(program.plan.checkpoint_path)
                run_batch(program, self._records(program, t.given), session=self.spark)
            else:
                run_until_done(program, session=self.spark)
        finally:
            for view in program.views:
                self.spark.catalog.dropTempView(view)
        result.rows = self._compare(test, project.table_path(t.table), t.expect.rows, "rows")
        expected_q = t.expect.quarantine
        q_path = project.quarantine_path(t.table)
        if isinstance(expected_q, int):
            got = self._read(q_path).count() if table_exists(q_path) else 0
            result.quarantine_count = (expected_q, got)
        elif expected_q is not None:
            result.quarantine = self._compare(test, q_path, expected_q, "quarantine")

    def _given_table(self, project: LoadedProject, test: LoadedTest, name: str) -> None:
        """The input table `name` of the test's run: an empty one as its program makes it,
        with the test's rows appended."""
        from streams.delta import DeltaTarget, write_batch

        self._ensure_empty(name)
        empty = self._at(self._scratch).table_path(name)
        path = project.table_path(name)
        shutil.copytree(empty, path)
        rows = test.test.given.get(name) or []
        if not rows:
            return
        schema = self._read(path).schema
        frame = self._typed(test, ("given", name), rows, schema, name)
        target = DeltaTarget(
            path, mode="append", app_id=f"test:{name}", engine=self.engines.delta.name
        )
        write_batch(frame, 0, target, commit_info={})

    def _records(self, program: TableProgram, given: dict[str, list[Any]]) -> DataFrame:
        """The test's records of the table's topics as one batch of Kafka records, in the
        columns of the table's stream: partition 0, offsets from 0 per topic; a federated
        table's records are its first cluster's (`_cluster`)."""
        schema = program.stream.schema
        now = dt.datetime.now()
        source = program.input
        federation = source.federation if isinstance(source, KafkaInput) else ()
        cluster = federation[0].name if federation else None
        rows = []
        for topic, records in given.items():
            for offset, record in enumerate(records):
                values = {
                    "key": None,
                    "value": _value(record),
                    "topic": topic,
                    "partition": 0,
                    "offset": offset,
                    "timestamp": now,
                    "timestamp_type": 0,
                    "timestampType": 0,
                    "cluster": cluster,
                }
                rows.append(tuple(values.get(f.name) for f in schema.fields))
        return self.spark.createDataFrame(rows, schema)

    def _compare(
        self, test: LoadedTest, path: str, rows: list[dict[str, Any]], where: str
    ) -> Comparison:
        actual_df = self._read(path) if table_exists(path) else None
        columns = list(rows[0]) if rows else []
        if actual_df is None:
            # Nothing ran a batch that created the table: every expected row is missing.
            return Comparison(columns, [tuple(r.get(c) for c in columns) for r in rows], [])
        if not columns:
            return Comparison([], [], [() for _ in range(actual_df.count())])
        from pyspark.sql.types import StructType

        schema = actual_df.schema
        self._check_columns(test, ("expect", where), rows, schema, test.table)
        listed = StructType([schema[c] for c in columns])
        typed = self._typed(test, ("expect", where), rows, listed, test.table)
        expected = collected(typed, columns)
        return Comparison(columns, *difference(expected, collected(actual_df, columns)))

    def _typed(
        self,
        test: LoadedTest,
        at: tuple[Any, ...],
        rows: list[dict[str, Any]],
        schema: StructType,
        table: str,
    ) -> DataFrame:
        """`rows` typed by `schema`; a row with a column `table` lacks, or a value not of
        its column's type, is a problem of the test file."""
        self._check_columns(test, at, rows, schema, table)
        frame, bad = typed_rows(self.spark, rows, schema)
        if bad:
            columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
            raise TableTestFileError(
                [
                    Problem(
                        test.file,
                        field_path(("tests", test.index, *at, j)),
                        f"a value is not of its column's type (`{table}`: {columns})",
                    )
                    for j in bad
                ],
                project=str(self.project.path),
            )
        return frame

    def _check_columns(
        self,
        test: LoadedTest,
        at: tuple[Any, ...],
        rows: list[dict[str, Any]],
        schema: StructType,
        table: str,
    ) -> None:
        names = schema.fieldNames()
        problems = [
            Problem(
                test.file,
                field_path(("tests", test.index, *at, j, column)),
                f"`{column}` is not a column of `{table}` (columns: {', '.join(names)})",
            )
            for j, row in enumerate(rows)
            for column in row
            if column not in names
        ]
        if problems:
            raise TableTestFileError(problems, project=str(self.project.path))

    # -- programs and roots --------------------------------------------------

    @property
    def _scratch(self) -> Path:
        return self.workdir / "empty"

    def _ensure_empty(self, name: str) -> None:
        """Make `name`'s table, empty, in the scratch root: its program over an empty batch,
        once its own inputs exist there."""
        if name in self._empty:
            return
        tables, _ = inputs(self.project, self.project.tables[name])
        for upstream in tables:
            self._ensure_empty(upstream)
        program = self._program(self._at(self._scratch), name)
        try:
            new_checkpoint(program.plan.checkpoint_path)
            empty = self.spark.createDataFrame([], program.stream.schema)
            run_batch(program, empty, session=self.spark)
        finally:
            for view in program.views:
                self.spark.catalog.dropTempView(view)
        self._empty.add(name)

    def _program(self, project: LoadedProject, table: str) -> TableProgram:
        program = build_program(
            project, table, self.spark, engines=self.engines, once=True, bootstrap=NO_BROKER
        )
        return dataclasses.replace(program, publish=None)

    def _at(self, root: Path) -> LoadedProject:
        """The project with its tables under `root`."""
        config = self.project.config.model_copy(update={"warehouse_root": str(root)})
        return dataclasses.replace(self.project, config=config)

    def _read(self, path: str) -> DataFrame:
        return self.engines.delta.read_snapshot(self.spark, path)


def _value(record: Any) -> bytes | None:
    """A record's value: a string as it is (raw), any other JSON value as JSON."""
    if record is None:
        return None
    if isinstance(record, str):
        return record.encode()
    return json.dumps(record, default=str).encode()
