"""Whether the landing path can run for a table from a session (`landing_blocker`), and
its executors' Python workers started before the first batch (`warm_up`).

The path's tasks import this package (and pyarrow, deltalake) in Spark's Python workers
and write Parquet files under the table's root through pyarrow's object-store clients;
the driver commits them with delta-rs. A session whose tasks run in this process's
environment on this machine (a `local` master) over a table on the local file system
can do all of that by construction. Anywhere else it is asked, not assumed: one small
Spark job whose tasks import the path's modules and write and delete an object under
the table's staging folder, with the executors' own environment and credentials under
the driver's storage section (as the path's tasks get it), and a delta-rs open of the
table on the driver. A table delta-spark created with a feature
delta-rs does not write (column mapping, deletion vectors, ...) stays on Spark's path.

`warm_up`: where nothing is asked (engines whose own reads already run Python in the
executors), one job in the background whose tasks start Spark's Python workers and
import the path while the query starts, which the table's first batch would pay
otherwise; the probe's tasks do the same on the way.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import streams.storage as storage
from streams.delta import STAGING_DIR
from streams.sessions import is_connect

logger = logging.getLogger(__name__)

WRITER_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "timestampNtz",
    }
)
"""The writer features of a table delta-rs appends to as delta-spark would."""
READER_FEATURES = frozenset({"timestampNtz"})
"""The reader features of such a table."""
_LEGACY_WRITER = 4
"""The highest writer version without features delta-rs appends to (v5 is column mapping)."""


def landing_blocker(spark: Any, table_path: str) -> str | None:
    """None when the landing path's tasks and commit can work on the table at
    `table_path` from `spark`'s session; else why not, in a phrase for the log."""
    if is_connect(spark):
        # Its batches run in the server's workers, whose sessions have no SparkContext
        # either, whatever its master: a `local` one may be on another machine.
        return "a Spark Connect session has no SparkContext to run the path's tasks"
    reason = _protocol_blocker(table_path)
    if reason is not None:
        return reason
    if runs_here(spark, table_path):
        return None
    return _tasks_blocker(spark, table_path)


def runs_here(spark: Any, table_path: str) -> bool:
    """Whether the path's tasks for the table at `table_path` run in this process's
    environment on this machine: a `local` master over a table on the local file system."""
    return str(spark.conf.get("spark.master", "")).startswith("local") and storage.is_local(
        table_path
    )


class WarmUp:
    """A job started in the background (`warm_up`) whose tasks start the executors'
    Python workers and import what the landing path's tasks import; `wait` returns once it
    ended, however it ended. Pickled (a Spark Connect `foreachBatch` function carries its
    table's program), it is one that has ended.

    Concurrency: started by one thread, its own thread runs the job; `wait` from any."""

    def __init__(self, spark: Any, name: str, carry: tuple[object, ...]) -> None:
        self._thread: threading.Thread | None = threading.Thread(
            target=self._run,
            args=(spark.sparkContext, name, carry),
            name=f"landing-warm-up-{name}",
            daemon=True,
        )
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_ended, ())

    @staticmethod
    def _run(sc: Any, name: str, carry: tuple[object, ...]) -> None:
        tasks = max(1, int(sc.defaultParallelism))
        t0 = time.perf_counter()
        try:
            started = (
                sc.parallelize(range(tasks), tasks)
                .mapPartitions(lambda _: iter([_warm_task(carry)]))
                .collect()
            )
        except Exception as e:  # noqa: BLE001 - the table's first batch meets it and says so
            logger.info("table %s: the landing path's warm-up failed: %s", name, _task_reason(e))
            return
        logger.info(
            "table %s: the landing path's warm-up ran %d task(s) in %.2fs (%d in a Python "
            "worker started before)",
            name,
            tasks,
            time.perf_counter() - t0,
            sum(started),
        )


def _ended() -> WarmUp:
    ended = WarmUp.__new__(WarmUp)
    ended._thread = None
    return ended


def warm_up(
    spark: Any, table_path: str, *, name: str, carry: tuple[object, ...] = ()
) -> WarmUp | None:
    """Starts, in the background, one job of as many tasks as Spark's default parallelism
    that start Spark's Python workers and import the landing path's task code and the
    modules of `carry` (objects the table's tasks get pickled: the rules), where a
    table's first batch would otherwise pay that (seconds on executors of a cluster).
    None where the tasks run here (`runs_here`) or on a Spark Connect session (no
    SparkContext); `name` names the table in the log."""
    if is_connect(spark) or runs_here(spark, table_path):
        return None
    return WarmUp(spark, name, carry)


def _protocol_blocker(table_path: str) -> str | None:
    """Why delta-rs cannot open or append to the table (None: it can, or no table yet)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    options = storage.current().object_store_options(table_path)
    try:
        table = DeltaTable(table_path, storage_options=options)
    except TableNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001 - delta-rs's errors of a store it cannot reach
        return f"the driver's delta-rs cannot open `{table_path}` ({_first_line(e)})"
    protocol = table.protocol()
    writer = set(protocol.writer_features or ())
    reader = set(protocol.reader_features or ())
    if protocol.min_writer_version < 7 and protocol.min_writer_version > _LEGACY_WRITER:
        return (
            f"the table's writer version {protocol.min_writer_version} is not one delta-rs writes"
        )
    if protocol.min_reader_version == 2:
        return "the table's reader version 2 (column mapping) is not one delta-rs writes"
    unknown = sorted((writer - WRITER_FEATURES) | (reader - READER_FEATURES))
    if unknown:
        listed = ", ".join(f"`{f}`" for f in unknown)
        return f"the table has feature(s) {listed}, which delta-rs does not write"
    mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    if mode != "none":
        return f"the table maps its columns (`delta.columnMapping.mode` `{mode}`)"
    return None


def _tasks_blocker(spark: Any, table_path: str) -> str | None:
    """Why Spark's tasks cannot import the path's modules or write under the table
    (None: every probing task did both)."""
    probe = storage.join(table_path, STAGING_DIR, f"reach-{uuid.uuid4().hex}")
    sc = spark.sparkContext  # a classic session's: `landing_blocker` answers for Connect
    tasks = max(1, int(sc.defaultParallelism))
    settings = storage.overrides()
    try:
        done = (
            sc.parallelize(range(tasks), tasks)
            .mapPartitionsWithIndex(lambda i, _: probe_task(probe, i, settings))
            .collect()
        )
    except Exception as e:  # noqa: BLE001 - any task failure: an import, a denied write
        return f"Spark's tasks cannot run it ({_task_reason(e)})"
    finally:
        try:
            storage.remove(probe)
        except Exception as e:  # noqa: BLE001 - the tasks' failure is the reason told
            logger.info("probe folder %s not removed: %s", probe, _first_line(e))
    if len(done) != tasks:
        return f"{len(done)} of Spark's {tasks} probing tasks answered"
    return None


def probe_task(probe: str, index: int, settings: dict[str, Any]) -> Iterator[int]:
    """In a task: import what the landing path's tasks run, write an object under
    `probe` and delete it, with the driver's storage section `settings` over the
    executor's own variables, as the path's tasks do."""
    import streams.landing.tasks as tasks  # pyarrow, deltalake, the parser

    tasks.warm_up(None)  # a table's first batch finds this worker started
    with storage.configured(settings):
        location = storage.join(probe, f"{index}-{uuid.uuid4().hex}")
        storage.write_bytes(location, b"")
        storage.remove(location)
    yield index


def _warm_task(carry: tuple[object, ...]) -> bool:
    import streams.landing.tasks as tasks  # pyarrow, deltalake, the parser

    return tasks.warm_up(carry)


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return (lines[0] if lines else type(e).__name__)[:300]


def _task_reason(e: BaseException) -> str:
    """The last `SomethingError: ...` line of the Python traceback a failed job
    forwards (an executor's `ModuleNotFoundError`, a denied write), else its first."""
    import re

    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    named = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception)\b", ln)]
    return (named[-1] if named else _first_line(e))[:300]
