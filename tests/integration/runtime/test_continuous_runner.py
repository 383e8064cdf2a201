"""The continuous runner's failure handling, with real Spark, a real broker, real Delta.

* A query that fails for real stops the run: the error names the table, every other
  query is stopped at a batch boundary (in-process, on the test session).
* The runner asks Spark whether a query still runs at most every few seconds; a
  failed batch ends it at once. It asks nothing of a query whether it has settled
  while no table waits to start.
* A query whose Python worker misses Spark's fixed 10 s connect-back window is started
  again and the run goes on: `warehouse run` in a subprocess whose Python workers are
  started through a wrapper that makes the first streaming-source worker slow, which is
  exactly what a busy machine does to it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from streams.kafka.admin import produce
from tests.integration.runtime.helpers import order, orders_project, rows, wait_for
from tests.integration.runtime.runs import stop, warehouse_run
from warehouse import Project
from warehouse.runtime.errors import QueryFailedError
from warehouse.runtime.live import ACTIVE_EVERY, LiveQuery, may_start
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.writer import BatchStats

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_a_real_failure_stops_every_query_and_names_the_table(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine=engine)
    # Valid SQL that fails on every row at run time.
    (proj / "layers" / "dwd" / "orders.yml").write_text(
        "table: dwd_orders\n"
        "source: {table: ods_orders}\n"
        "transform:\n  sql: |\n"
        "    SELECT order_id, user_id, amount, event_time FROM source\n"
        "    WHERE assert_true(amount < 0, 'amount is not negative') IS NULL\n"
        "sink: {mode: append}\n"
    )
    produce(broker.bootstrap, topic, [("a", order("o1", "u1", 10.0, 0))])
    project = Project.load(proj, environ={})
    lines: list[str] = []
    pipeline = Pipeline(
        project, spark, layer="all", bootstrap=broker.bootstrap, progress=lines.append
    )

    with pytest.raises(QueryFailedError) as failed:
        pipeline.run(once=False)

    assert failed.value.table == "dwd_orders"
    assert "Table `dwd_orders` (layer `dwd`)" in str(failed.value)
    assert "amount is not negative" in str(failed.value)
    assert not [q for q in spark.streams.active if (q.name or "").startswith("warehouse_")]
    # Started upstream first, and stopped cleanly: ODS wrote its batch and committed it.
    assert lines[0].startswith("ods_orders [ods]: started")
    assert any(line.startswith("stopped: ods_orders [ods]: 1 batch(es)") for line in lines), lines
    assert rows(project.table_path("ods_orders"), ["order_id"]) == [("o1",)]
    assert (Path(project.checkpoint_path("ods_orders")) / "commits" / "0").is_file()


SLOW_FIRST_SOURCE = """#!/bin/sh
# The first streaming-source worker starts 15 s late: Spark waits 10 s for it to connect.
if [ "$2" = "pyspark.sql.streaming.python_streaming_source_runner" ] && mkdir "$0.slowed" 2>/dev/null
then
  sleep 15
fi
exec {python} "$@"
"""


@pytest.mark.slow
def test_a_worker_that_misses_the_connect_window_is_started_again(
    broker, unique, tmp_path: Path
) -> None:
    # The Python engine's stream sources are the Python workers this test delays.
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine="python")
    dwd = proj / ".warehouse" / "tables" / "dwd_orders"
    produce(broker.bootstrap, topic, [("a", order("o1", "u1", 10.0, 0))])
    python = tmp_path / "python"
    python.write_text(SLOW_FIRST_SOURCE.format(python=sys.executable))
    python.chmod(0o755)
    log_path = tmp_path / "run.log"
    with warehouse_run(proj, log_path, PYSPARK_PYTHON=str(python)) as proc:
        wait_for(
            lambda: (dwd / "_delta_log").is_dir() and rows(dwd, ["order_id"]) == [("o1",)],
            timeout=400,
            what="o1 in dwd_orders",
            log=log_path,
            proc=proc,
        )
        code = stop(proc)
    output = "\n".join(
        line for line in log_path.read_text().splitlines() if not line.startswith(("\tat ", "["))
    )
    assert (tmp_path / "python.slowed").is_dir()  # the slow start did happen
    assert "ods_orders: query failed to start its Python worker in time (attempt 1 of 8" in output
    assert code == 0, output[-4000:]
    assert rows(dwd, ["order_id"]) == [("o1",)]
    assert "stopped: ods_orders [ods]" in output and "stopped: dwd_orders [dwd]" in output


class _ActiveAsks:
    """The query as the runner sees it, counting its asks whether the query is active
    (`count`) and of its progress and status (`others`)."""

    def __init__(self, query) -> None:
        self._query, self.count, self.others = query, 0, 0

    def __getattr__(self, name: str):
        if name == "isActive":
            self.count += 1
        elif name in ("lastProgress", "recentProgress", "status"):
            self.others += 1
        return getattr(self._query, name)


def _idle_query(spark, inbox: Path, checkpoint: Path) -> Any:
    """A real streaming query over an empty folder: active, and never a batch to run."""
    return (
        spark.readStream.schema("i INT")
        .json(str(inbox))
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .start()
    )


def test_the_runner_asks_whether_a_query_runs_at_most_every_few_seconds(
    spark, tmp_path: Path
) -> None:
    """The runner looks at its queries once or twice a second; whether Spark still runs one (a
    call into the JVM) it asks at most every `ACTIVE_EVERY` seconds, and a batch that failed in the writer
    ends the query at once."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    stats = BatchStats()
    cq = SimpleNamespace(writer=SimpleNamespace(stats=stats, remote=False))
    query = _idle_query(spark, inbox, tmp_path / "checkpoint")
    try:
        asks = _ActiveAsks(query)
        live = LiveQuery(cq, asks, since=0.0, attempt=1)  # type: ignore[arg-type]
        t = 1000.0
        assert all(live.running(t + 0.5 * i) for i in range(10))  # ten looks in 5 s
        assert asks.count == 1
        assert live.running(t + ACTIVE_EVERY) and asks.count == 2
        query.stop()
        assert live.running(t + ACTIVE_EVERY + 0.5) and asks.count == 2  # not asked yet
        assert not live.running(t + 2 * ACTIVE_EVERY) and asks.count == 3
        query = _idle_query(spark, inbox, tmp_path / "checkpoint2")
        live = LiveQuery(cq, _ActiveAsks(query), since=0.0, attempt=1)  # type: ignore[arg-type]
        assert live.running(t)
        stats.error = RuntimeError("a batch failed in the writer")
        assert not live.running(t + 0.5)
    finally:
        query.stop()


def test_the_runner_asks_nothing_of_a_settling_query_while_no_table_waits(
    spark, tmp_path: Path
) -> None:
    """Before a table starts, the runner waits until every live query has created its
    sources (a call into the JVM per question); with no table left to start, it asks
    none."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    query = _idle_query(spark, inbox, tmp_path / "checkpoint")
    try:
        query.processAllAvailable()  # created its sources: no longer settling
        asks = _ActiveAsks(query)
        cq = SimpleNamespace(writer=SimpleNamespace(stats=BatchStats(), remote=False))
        live = {"t": LiveQuery(cq, asks, since=time.monotonic(), attempt=1)}  # type: ignore[arg-type]
        assert not may_start(live, {}, settle_seconds=60)
        assert asks.count == 0 and asks.others == 0
        assert may_start(live, {"u": (0.0, 1)}, settle_seconds=60)
        # whether it is active, and its progress (and its status while it has none)
        assert asks.count == 1 and asks.others >= 1
    finally:
        query.stop()


def test_the_runner_reads_no_progress_of_a_query_that_ran_no_batch_since_its_start(
    spark, tmp_path: Path
) -> None:
    """A query whose trigger waits for input has no progress for as long as it waits:
    the runner asks Spark for it (a call into the JVM) only once the writer has counted
    a batch of this start."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    stats = BatchStats()
    cq = SimpleNamespace(writer=SimpleNamespace(stats=stats, remote=False))
    query = _idle_query(spark, inbox, tmp_path / "checkpoint")
    try:
        query.processAllAvailable()
        asks = _ActiveAsks(query)
        live = LiveQuery(cq, asks, since=0.0, attempt=1)  # type: ignore[arg-type]
        for _ in range(10):
            live.note_progress()
        assert asks.others == 0
        stats.last_batch = 0  # the writer ran batch 0
        live.note_progress()
        assert asks.others >= 1
    finally:
        query.stop()
