"""A `--once` run runs the tables that do not read each other side by side.

Two ODS tables read topics of their own, and a DWD table reads one of them. Each ODS
table's batch holds until the other ODS table's query has planned its first batch (and
fails when that does not happen while it runs), so a run that ends well ran the two
queries at once. Real broker, real Spark, real Delta, each engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.projects import new_topic
from tests.integration.runtime.helpers import order, rows, version
from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.errors import QueryFailedError
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

HOLD_SECONDS = 120
"""How long a held batch waits for its fact before it fails: a bound on a run that does
not run the tables at once, not a measure of one that does."""

TRANSFORMS = f'''\
"""Batches that hold on until a fact outside their query is true."""

import time
from pathlib import Path

from pyspark.sql import functions as F

OTHER = {{"ods_first": "ods_second", "ods_second": "ods_first"}}


def _held_until(df, path):
    def hold(value):
        deadline = time.monotonic() + {HOLD_SECONDS}
        while not Path(path).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{{path}} did not appear while this batch ran")
            time.sleep(0.1)
        return value

    return df.withColumn("order_id", F.udf(hold, "string")("order_id"))


def until_the_other_started(df, ctx):
    """Until the other ODS table's query has planned its first batch."""
    return _held_until(df, str(ctx.project.checkpoint_path(OTHER[ctx.table])) + "/offsets/0")


def as_it_is(df, ctx):
    return df


def until_released(df, ctx):
    """Until the test writes `release` beside the project."""
    return _held_until(df, str(Path(ctx.project.path) / "release"))


def fails(df, ctx):
    def fail(value):
        raise ValueError("this table's batches fail")

    return df.withColumn("order_id", F.udf(fail, "string")("order_id"))
'''


def _project(
    tmp_path: Path, broker, unique, engine: str, first: str, second: str, third: str | None = None
) -> Project:
    """`ods_first` and `ods_second` (and `ods_third`, given its transform) on topics of
    their own (a record each) with the Python transforms named, and `dwd_orders` reading
    `ods_first`."""
    root = write_project(tmp_path / "proj", bootstrap=broker.bootstrap, engine=engine)
    (root / "transforms").mkdir()
    (root / "transforms" / "__init__.py").write_text("")
    (root / "transforms" / "held.py").write_text(TRANSFORMS)
    ods = root / "layers" / "ods"
    (ods / "orders.yml").unlink()
    tables = [("ods_first", first), ("ods_second", second)]
    tables += [("ods_third", third)] if third is not None else []
    for i, (table, transform) in enumerate(tables):
        topic = new_topic(broker.bootstrap, unique(table), [("k", order(f"o{i}", "u1", 1.0, i))])
        (ods / f"{table}.yml").write_text(
            f"table: {table}\n"
            f"source:\n  kafka: {{topic: {topic}, format: json, schema: orders}}\n"
            f"transform: {{python: 'transforms.held:{transform}'}}\n"
            "sink: {mode: append}\n"
        )
    dwd = root / "layers" / "dwd" / "orders.yml"
    dwd.write_text(dwd.read_text().replace("ods_orders", "ods_first"))
    return Project.load(root)


def _line(lines: list[str], table: str, *, began: bool) -> int:
    """Where the runner said `table` began ("running once from") or ended (its result)."""
    return next(
        i
        for i, line in enumerate(lines)
        if line.startswith(f"{table} [") and ("running once from" in line) == began
    )


def test_independent_tables_run_at_once_and_a_reader_after_its_input(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    """Both ODS queries run at once (each batch held until the other query planned its
    first batch); `dwd_orders` starts once `ods_first`, which it reads, has ended; each
    table's lines and results come in the run's order."""
    project = _project(
        tmp_path, broker, unique, engine, "until_the_other_started", "until_the_other_started"
    )
    lines: list[str] = []
    active_at_start: dict[str, set[str]] = {}

    def progress(line: str) -> None:
        lines.append(line)
        if "running once from" in line:
            table = line.split(" ", 1)[0]
            active_at_start[table] = {str(q.name) for q in spark.streams.active}

    pipeline = Pipeline(project, spark, layer="all", progress=progress)
    assert pipeline.names == ["ods_first", "ods_second", "dwd_orders"]
    results = pipeline.run(once=True)

    assert [r.table for r in results] == ["ods_first", "ods_second", "dwd_orders"]
    assert [r.rows_written for r in results] == [1, 1, 1]
    assert "warehouse_ods_first" not in active_at_start["dwd_orders"]
    assert _line(lines, "ods_second", began=True) < _line(lines, "ods_first", began=False)
    assert _line(lines, "ods_first", began=False) < _line(lines, "dwd_orders", began=True)
    for table in pipeline.names:
        assert _line(lines, table, began=True) < _line(lines, table, began=False)
    assert rows(project.table_path("dwd_orders"), ["order_id"]) == [("o0",)]
    assert rows(project.table_path("ods_second"), ["order_id"]) == [("o1",)]
    assert spark.streams.active == []


def test_a_failing_table_stops_the_running_one_and_its_failure_is_raised(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    """`ods_second`'s batch fails while `ods_first`'s batch holds: the run raises
    `ods_second`'s failure and stops `ods_first` mid-batch, which commits nothing; the
    next run of `ods_first` writes its record once."""
    project = _project(tmp_path, broker, unique, engine, "until_released", "fails")
    with pytest.raises(QueryFailedError) as failed:
        Pipeline(project, spark, layer="ods", progress=lambda _: None).run(once=True)
    assert failed.value.table == "ods_second"
    assert "this table's batches fail" in str(failed.value)
    assert spark.streams.active == []
    first = project.table_path("ods_first")
    assert version(first) is None or rows(first, ["order_id"]) == []

    (Path(project.path) / "release").write_text("")
    Pipeline(project, spark, tables=["ods_first"], progress=lambda _: None).run(once=True)
    assert rows(first, ["order_id"]) == [("o0",)]


def test_at_most_concurrent_batches_queries_run_at_once(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    """`spark.concurrent_batches: auto` on the session's `local[2]` is two queries at once:
    `ods_first` and `ods_second` hold their batches until both have planned one, and
    `ods_third`, which reads no other table, starts only once one of them has ended."""
    project = _project(
        tmp_path,
        broker,
        unique,
        engine,
        "until_the_other_started",
        "until_the_other_started",
        "as_it_is",
    )
    assert project.config.spark.concurrent_batches == "auto"
    assert spark.conf.get("spark.master") == "local[2]"
    lines: list[str] = []
    pipeline = Pipeline(project, spark, layer="ods", progress=lines.append)
    assert pipeline.names == ["ods_first", "ods_second", "ods_third"]

    results = pipeline.run(once=True)

    assert [r.rows_written for r in results] == [1, 1, 1]
    third_began = _line(lines, "ods_third", began=True)
    ended = [_line(lines, t, began=False) for t in ("ods_first", "ods_second")]
    assert min(ended) < third_began, lines
    assert rows(project.table_path("ods_third"), ["order_id"]) == [("o2",)]
    assert spark.streams.active == []
