"""A batch refused at a stop fails without Spark reporting the query as failed.

A continuous run's batch that begins after its query was asked to stop (or that still
waits for its turn then) fails with `StopRequested`, so Spark does not commit it and
the next run replays it. Real Spark, a real streaming query (Spark's `rate` source):
failing at once makes Spark end the query with an error (`exception()`, which Spark
keeps exactly when it logs the query as terminated with error, with both stack traces);
failing through `wait_for_stop` ends it as a stop, and the refused batch is still left
out of the checkpoint's commit log. A stop that comes while a batch is being planned
waits for the batch to reach the writer rather than interrupt its planning.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from warehouse.runtime.writer import StopRequested, stop_between_calls, wait_for_stop

pytestmark = [pytest.mark.spark]


def _started(source, batch, checkpoint: Path):
    """`source` written by `batch` in `foreachBatch`, returned once a first batch has been
    committed (or 60 s have passed)."""
    query = (
        source.writeStream.foreachBatch(batch).option("checkpointLocation", str(checkpoint)).start()
    )
    try:
        deadline = time.monotonic() + 60
        while query.isActive and query.lastProgress is None and time.monotonic() < deadline:
            time.sleep(0.2)
    except BaseException:
        query.stop()
        raise
    return query


def _refused_at_stop(spark, checkpoint: Path, *, through_wait: bool):
    """Run a query until one of its batches fails as a stopping `BatchWriter`'s does,
    then stop it; returns (query, what the refused batch failed with, its batch id)."""
    refuse, refusing = threading.Event(), threading.Event()
    failures: list[StopRequested] = []
    refused: list[int] = []

    def batch(df, batch_id: int) -> None:
        if not refuse.is_set():
            return
        refused.append(batch_id)
        refusing.set()
        error = StopRequested(f"table t: stop requested before batch {batch_id}")
        if through_wait:
            error = wait_for_stop(df.sparkSession, error)
        failures.append(error)
        raise error

    # A first batch committed before the refusals begin.
    query = _started(
        spark.readStream.format("rate").option("rowsPerSecond", 20).load(), batch, checkpoint
    )
    try:
        refuse.set()
        assert refusing.wait(60), "no batch began after the refusal was set"
        time.sleep(0.5)  # the batch waits for the stop by now, or failed at once
    finally:
        query.stop()
    return query, failures, refused[0]


def _committed(checkpoint: Path) -> set[int]:
    return {int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}


def test_a_batch_refused_through_wait_for_stop_ends_the_query_as_a_stop(
    spark, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoint"
    query, failures, refused = _refused_at_stop(spark, checkpoint, through_wait=True)

    assert query.exception() is None
    assert len(failures) == 1
    message = str(failures[0])
    assert message.startswith(f"table t: stop requested before batch {refused}")
    assert "java.lang.InterruptedException" in message
    assert refused not in _committed(checkpoint)  # replayed by the next run


def test_a_batch_refused_at_once_ends_the_query_with_an_error(spark, tmp_path: Path) -> None:
    """Why the wait: the same refusal and stop without it, as a stopping writer failed
    before `wait_for_stop`."""
    checkpoint = tmp_path / "checkpoint"
    query, _failures, refused = _refused_at_stop(spark, checkpoint, through_wait=False)

    error = query.exception()
    assert error is not None and "stop requested before batch" in str(error)
    assert refused not in _committed(checkpoint)


def _slow_planning_source():
    """A Python streaming source with a row at every trigger. Once `<dir>/slow` exists,
    its `latestOffset` (a step of a batch's planning, in the source's own Python worker)
    writes `<dir>/planning`, takes 3 s, then writes `<dir>/planned`. Defined in a function
    so that Spark's worker gets the classes by value."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class Reader(DataSourceStreamReader):
        def __init__(self, folder: str) -> None:
            self.folder = Path(folder)
            self.n = 0

        def initialOffset(self) -> dict:
            return {"n": 0}

        def latestOffset(self) -> dict:
            if (self.folder / "slow").exists() and not (self.folder / "planned").exists():
                (self.folder / "planning").touch()
                time.sleep(3)
                (self.folder / "planned").touch()
            self.n += 1
            return {"n": self.n}

        def partitions(self, start: dict, end: dict):
            return [InputPartition(end["n"])]

        def read(self, partition):
            yield (partition.value,)

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "slow_planning_test"

        def schema(self) -> str:
            return "n long"

        def streamReader(self, schema):
            return Reader(self.options["dir"])

    return Source


def test_a_stop_during_planning_waits_for_the_batch_to_reach_the_writer(
    spark, tmp_path: Path
) -> None:
    """Interrupted in its planning, a step of Spark's logs its failure (a broadcast's
    "Store broadcast ... fail", a Python source runner's traceback). The stop lets the
    planning end; the batch is refused in the writer, as at any stop."""
    spark.dataSource.register(_slow_planning_source())
    folder = tmp_path / "source"
    folder.mkdir()
    checkpoint = tmp_path / "checkpoint"
    stopping, refused = threading.Event(), threading.Event()
    refused_batches: list[int] = []

    def batch(df, batch_id: int) -> None:
        if not stopping.is_set():
            return
        refused_batches.append(batch_id)
        refused.set()
        raise wait_for_stop(
            df.sparkSession, StopRequested(f"table t: stop requested before batch {batch_id}")
        )

    # A first batch committed before the planning slows down.
    source = spark.readStream.format("slow_planning_test").option("dir", str(folder)).load()
    query = _started(source, batch, checkpoint)
    try:
        deadline = time.monotonic() + 60
        (folder / "slow").touch()
        while not (folder / "planning").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (folder / "planning").exists(), "no batch was planned after `slow` was set"
        stopping.set()
        stop_between_calls(query, refused, timeout=30)
    finally:
        query.stop()

    assert (folder / "planned").exists()  # the planning was not cut off
    assert refused_batches, "the stop interrupted the batch before it reached the writer"
    assert query.exception() is None
    assert refused_batches[0] not in _committed(checkpoint)
