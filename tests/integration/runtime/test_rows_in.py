"""A continuous run counts every source row of a table that reads a table.

A query whose trigger finds no new input still reports progress now and then, with no
rows and the id of the batch it has yet to run; the batch that then runs under that id
has rows. Both engines, real broker, real Spark, real Delta: orders arrive in two waves
with an idle report of `dwd_orders` between them, and the run's result must say that
`dwd_orders` read every order the landing table wrote.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from deltalake.exceptions import TableNotFoundError

from streams.kafka.admin import produce
from tests.integration.runtime.helpers import order, orders_project, rows
from warehouse import Project
from warehouse.runtime.live import LiveQuery, ran
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.results import RunResult
from warehouse.runtime.writer import BatchStats

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

IDLE_REPORTS = "spark.sql.streaming.noDataProgressEventInterval"


def wait_until(check: Callable[[], bool], runner: threading.Thread, what: str) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and runner.is_alive():
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"gave up waiting for {what} (run alive: {runner.is_alive()})")


def test_a_batch_after_an_idle_report_counts_its_rows(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine=engine)
    project = Project.load(proj, environ={})
    dwd = project.table_path("dwd_orders")

    def dwd_orders() -> int:
        try:
            return len(rows(dwd, ["order_id"]))
        except (TableNotFoundError, FileNotFoundError):
            return 0

    def idle_report() -> bool:
        query = next((q for q in spark.streams.active if q.name == "warehouse_dwd_orders"), None)
        return query is not None and not all(ran(p) for p in query.recentProgress)

    first = [f"a{i}" for i in range(3)]
    second = [f"b{i}" for i in range(4)]
    produce(broker.bootstrap, topic, [(o, order(o, "u1", 1.0, 0)) for o in first])
    results: list[RunResult] = []
    pipeline = Pipeline(project, spark, layer="all", bootstrap=broker.bootstrap)
    runner = threading.Thread(target=lambda: results.extend(pipeline.run(once=False)), daemon=True)
    spark.conf.set(IDLE_REPORTS, "0")  # every idle trigger reports, not one in 10 s
    try:
        runner.start()
        wait_until(lambda: dwd_orders() == len(first), runner, "the first wave in dwd_orders")
        wait_until(idle_report, runner, "an idle progress report of dwd_orders")
        produce(broker.bootstrap, topic, [(o, order(o, "u1", 1.0, 1)) for o in second])
        wait_until(
            lambda: dwd_orders() == len(first) + len(second),
            runner,
            "the second wave in dwd_orders",
        )
    finally:
        pipeline.request_stop()
        runner.join(timeout=180)
        spark.conf.unset(IDLE_REPORTS)
    assert not runner.is_alive()

    by_table = {r.table: r for r in results}
    assert by_table["ods_orders"].rows_read == len(first) + len(second)
    assert by_table["dwd_orders"].rows_written == len(first) + len(second)
    assert by_table["dwd_orders"].rows_read == len(first) + len(second), by_table["dwd_orders"]


class _ProgressReads:
    """The query as the runner sees it, counting its reads of the query's progress."""

    def __init__(self, query) -> None:
        self._query, self.count = query, 0

    def __getattr__(self, name: str):
        if name in ("lastProgress", "recentProgress"):
            self.count += 1
        return getattr(self._query, name)


def test_progress_is_noted_once_per_batch_across_gaps_and_idle_reports(
    spark, tmp_path: Path
) -> None:
    """The runner reads only the newest progress update while batches come one at a
    time, the whole list when more than one ran since it last looked, and nothing while
    no batch ran past the last one noted (an idle query)."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    stats = BatchStats()
    # what note_progress reads: a classic session's writer (its batches ran in this process)
    cq = SimpleNamespace(writer=SimpleNamespace(stats=stats, remote=False))

    def arrive(name: str, n: int) -> None:
        (inbox / f"{name}.json").write_text("".join(f'{{"i": {i}}}\n' for i in range(n)))

    def counted(df, batch_id: int) -> None:  # as the writer writes and counts a batch
        df.write.format("noop").mode("overwrite").save()
        stats.last_batch = batch_id

    spark.conf.set(IDLE_REPORTS, "0")
    query = (
        spark.readStream.schema("i INT")
        .option("maxFilesPerTrigger", 1)
        .json(str(inbox))
        .writeStream.foreachBatch(counted)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        reads = _ProgressReads(query)
        live = LiveQuery(cq, reads, since=time.monotonic(), attempt=1)  # type: ignore[arg-type]
        arrive("a", 2)
        query.processAllAvailable()
        live.note_progress()  # the first look reads the whole list
        assert stats.input_rows == {0: 2}
        arrive("b", 3)
        arrive("c", 4)  # two batches (one file each) before the next look
        query.processAllAvailable()
        live.note_progress()
        assert stats.input_rows == {0: 2, 1: 3, 2: 4}
        deadline = time.monotonic() + 60
        while ran(query.lastProgress) and time.monotonic() < deadline:
            time.sleep(0.2)  # until a trigger without input has reported
        assert not ran(query.lastProgress)
        assert query.lastProgress.batchId == 3  # the id yet to run
        before = reads.count
        for _ in range(3):
            live.note_progress()  # no batch ran since the last look: nothing to read
        assert reads.count == before
        arrive("d", 5)
        query.processAllAvailable()
        live.note_progress()
        assert stats.input_rows == {0: 2, 1: 3, 2: 4, 3: 5}
    finally:
        query.stop()
        spark.conf.unset(IDLE_REPORTS)
