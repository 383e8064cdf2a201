"""The `foreachBatch` function of every table: the batch's turn, its program, its count.

Runs on the driver for each micro-batch. `BatchWriter` keeps what is per batch by
nature: the run's gate, the lock a stop takes, refusing a batch that begins after a
stop, calling the table's write strategies (`warehouse.write`, chosen when the table
compiled) and publishing after the commit; it counts what was done in `BatchStats`.
The runner stops a query between batches with `stop_at_batch_boundary`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import streams.storage as storage
from streams.sessions import is_connect
from warehouse.errors import known_errors
from warehouse.runtime.gate import BatchGate, GateClosed
from warehouse.runtime.remote import RemoteBatches, read_outcome
from warehouse.write import BatchContext, Outcome, WriteStrategy, strategies

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streams.cdc import Publisher
    from warehouse.compile.program import TableProgram

logger = logging.getLogger(__name__)


@dataclass
class BatchStats:
    """Counters of one query, updated after each micro-batch (driver side, one thread)."""

    rows_in: int = 0
    """Rows handed to foreachBatch (after the streaming operators)."""
    input_rows: dict[int, int] = field(default_factory=dict)
    """Source rows per batch id: the records a Kafka batch held (the writer), else the
    query progress's numInputRows (the runner fills it)."""
    rows_written: int = 0
    quarantined: int = 0
    dropped: int = 0
    batches: int = 0
    skipped: int = 0
    last_batch: int | None = None
    last_version: int | None = None
    batch_seconds: float = 0.0
    gate_seconds: float = 0.0
    """Time batches waited for a slot of the run's `BatchGate` before they began."""
    error: BaseException | None = None
    published: int = 0
    dead_letters: int | None = None
    """Records sent to the table's dead-letter topic; None without one."""
    warned: dict[str, int] = field(default_factory=dict)
    """Rows that failed a `warn` expectation (kept, unless another set them aside), by
    expectation: the quality events' `failed`."""
    notes: list[str] = field(default_factory=list)


class StopRequested(Exception):
    """Raised by a batch that began after the runner asked the query to stop.

    Failing the batch (instead of returning) keeps it out of Spark's commit log,
    so the next run replays it; returning would mark it done without a write.
    """


class _RefusedBatches(logging.Filter):
    """Drops py4j's log of a `foreachBatch` call that failed with `StopRequested`: py4j
    logs every exception a Python callback raises at ERROR with its traceback, and a
    batch refused at a stop is part of stopping, not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, StopRequested)


def _quiet_refused_batches() -> None:
    """Install `_RefusedBatches` on py4j's callback logger, once."""
    py4j = logging.getLogger("py4j.clientserver")
    if not any(isinstance(f, _RefusedBatches) for f in py4j.filters):
        py4j.addFilter(_RefusedBatches())


_STOP_WAIT = 60.0
"""Seconds a batch refused at a stop waits for the runner's `query.stop()`."""

_PLANNING_WAIT = 30.0
"""Seconds a stop waits for a batch being planned to reach the writer (and be refused)
before it interrupts the planning."""


def stop_between_calls(query: StreamingQuery, refused: threading.Event, *, timeout: float) -> None:
    """Stop `query` where the interrupt cuts no work of Spark's: between two of its
    triggers, or in a batch that reached the writer and waits for the stop (`refused`,
    set before `wait_for_stop`).

    `query.stop()` interrupts the query's thread wherever it is. In a batch still being
    planned (a Delta source reading its log, a scan broadcasting its configuration, a
    Python source's call to its worker) the interrupted step logs its own failure:
    Spark's "ERROR TorrentBroadcast: Store broadcast ... fail", a Python source
    runner's traceback. Planning ends within seconds, and the batch then reaches the
    writer, which refuses it; only after `timeout` seconds is the planning interrupted.
    """
    deadline = time.monotonic() + timeout
    while query.isActive and not refused.is_set() and time.monotonic() < deadline:
        if not query.status["isTriggerActive"]:
            break
        time.sleep(0.05)
    query.stop()


def wake_source(program: TableProgram) -> None:
    """End the wait of `program`'s source for new input, now and at every later trigger
    (its `wake_file`, which the query's release removes): Spark's query thread waits in
    the source's call and cannot be interrupted there, so a stop would otherwise wait
    for the wait's end (docs/decisions/0079)."""
    if program.wake_file is None:
        return
    with suppress(FileExistsError):
        with open(program.wake_file, "x"):
            pass


def wait_for_stop(spark: SparkSession, error: StopRequested) -> StopRequested:
    """Hold a batch refused at a stop (`StopRequested`), or failed with an error the
    runner reports itself (`BatchWriter.failed`), until the runner stops its query, and
    return what the batch fails with.

    The batch must fail, and Spark logs a failed batch as the query terminating with an
    error, with both stack traces, at every stop of a continuous run, unless the failure
    is the stop's own interrupt of the query's thread. With pyspark's pinned threads
    (the default) the calls a `foreachBatch` function makes run on that thread, so the
    batch waits in the JVM (`Thread.sleep`) until `query.stop()` interrupts it, then
    fails naming the interrupted call, which is how Spark tells a Python function's
    interrupted call from a failure (its `StreamExecution.isInterruptionException`).
    Only the first lines of the interrupt are named: Spark matches them with a pattern
    that overflows the stack on a whole Java stack trace. Off the query's thread (pinned
    threads off), or when no stop comes within `_STOP_WAIT` seconds, `error` is
    returned as it is."""
    from py4j.protocol import Py4JJavaError

    jvm = getattr(spark, "_jvm", None)
    if jvm is None or not str(jvm.java.lang.Thread.currentThread().getName()).startswith(
        "stream execution thread"
    ):
        return error
    deadline = time.monotonic() + _STOP_WAIT
    try:
        while time.monotonic() < deadline:
            jvm.java.lang.Thread.sleep(100)
    except Py4JJavaError as e:
        if e.java_exception.getClass().getName() != "java.lang.InterruptedException":
            raise
        call = " ".join(line.strip() for line in str(e).splitlines()[:2])
        return StopRequested(f"{error} (py4j.protocol.Py4JJavaError: {call})")
    return error


class BatchWriter:
    """Callable given to `foreachBatch`.

    Concurrency: Spark calls it one batch at a time from the query thread; the
    runner takes `lock` to wait for a running batch to finish before it stops
    the query, and sets `stopping` so that a batch starting after that fails
    without writing. With a `gate` (a continuous run's `BatchGate`, shared by its
    queries) a batch writes inside one of its turns, waited for outside `lock`; a
    table at depth 0 asks for its next batch's turn when a batch ends. A batch that
    fails with one of the framework's own errors keeps it in `stats.error`, sets
    `failed` and waits for the runner to stop the query, which reports the error.
    """

    def __init__(
        self,
        program: TableProgram,
        *,
        session: SparkSession | None = None,
        gate: BatchGate | None = None,
        depth: int = 0,
    ) -> None:
        self.program = program
        self.session = session
        self.stats = BatchStats(dead_letters=None if program.dead_letters is None else 0)
        self.strategies: tuple[WriteStrategy, ...] = strategies(program)
        self.gate = gate
        self.depth = depth
        self.lock = threading.Lock()
        self.stopping = False
        self.refused = threading.Event()
        """Set when a batch waits in the writer for the stop: refused at a stop, or
        failed with one of the framework's own errors (`failed`)."""
        self.failed = threading.Event()
        """Set when a batch failed with one of the framework's own errors (`stats.error`)
        and waits for the runner to stop its query."""
        self.on_batch: Callable[[int], None] | None = None
        self.remote = False
        """Whether the query's batches run on a Spark Connect server (`function`)."""
        self._publisher: Publisher | None = None
        self._dead_letters: Publisher | None = None
        self._noted: set[int] = set()
        """Batches a Connect server ran that `note_remote` counted."""
        self._may_replay = True
        """Whether the next batch may be a replay: the first batch of each start of the
        query (set by `function`), until one ends."""
        _quiet_refused_batches()

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        try:
            with self._slot(batch_id), self.lock:
                if self.stopping:
                    raise self._stop_requested(batch_id)
                try:
                    self._run(batch_df, batch_id)
                except BaseException as e:
                    # Kept for the runner: Spark wraps it in a StreamingQueryException.
                    self.stats.error = e
                    raise
                finally:
                    self._restore_active_session()
        except StopRequested as e:
            # Outside the gate and the lock: the runner's stop needs neither.
            self.refused.set()
            raise wait_for_stop(batch_df.sparkSession, e) from None
        except known_errors():
            # Our own error, with a message for the user: the runner reports it from
            # `stats.error`, so the batch ends as a stop would end it, without Spark's
            # and py4j's stack traces around that message.
            self.failed.set()
            self.refused.set()
            held = StopRequested(f"table {self.program.name}: batch {batch_id} failed")
            ended = wait_for_stop(batch_df.sparkSession, held)
            if ended is held:  # no stop came: fail with the error itself
                raise
            raise ended from None
        if self.on_batch is not None:
            self.on_batch(batch_id)
        if self.gate is not None and self.depth == 0:
            # A table without an upstream table waits longest for a turn (the lowest
            # priority), and Spark fixes a batch's offsets before calling us: asking for
            # the next batch's turn now puts what arrives while it waits in that batch.
            self.gate.reserve(self, self.depth, cancelled=lambda: self.stopping)

    def function(self, stream: DataFrame) -> Callable[[DataFrame, int], None]:
        """What the query of `stream` gets as its `foreachBatch` function: this writer on a
        classic session, where Spark calls back into this process; on Spark Connect, where
        the server runs the function in a Python worker of its own, a `RemoteBatches` of
        the program, and the runner learns of the batches from the query's progress."""
        if not is_connect(stream.sparkSession):
            self._may_replay = True  # a new start: its first batch may be a replay
            return self
        self.remote = True
        return RemoteBatches(self.program)

    def note_remote(self, batch_id: int, input_rows: int) -> None:
        """Count a batch a Connect server ran (`function`) once its query's progress shows
        it: by the outcome the worker recorded (`read_outcome`), as a batch run here is
        counted, and then tell `on_batch`; without a record, only the rows the progress
        says it read."""
        if batch_id in self._noted:
            return
        self._noted.add(batch_id)
        recorded = read_outcome(self.program.targets.checkpoint, batch_id)
        if recorded is None:
            s = self.stats
            s.input_rows.setdefault(batch_id, input_rows)
            s.batches += 1
            s.last_batch = batch_id if s.last_batch is None else max(s.last_batch, batch_id)
            return
        self.stats.input_rows.setdefault(batch_id, input_rows)
        self.stats.published += recorded.published
        self._count_dead_letters(recorded.dead_letters)
        self._count(batch_id, "Spark Connect", recorded.outcome, recorded.warned, recorded.seconds)
        if self.on_batch is not None:
            self.on_batch(batch_id)

    def close(self) -> None:
        """Release what the writer keeps between batches (the publishers' Kafka clients),
        once its query has stopped."""
        kept = (self._publisher, self._dead_letters)
        self._publisher = self._dead_letters = None
        for publisher in kept:
            if publisher is None:
                continue
            try:
                publisher.close()
            except Exception as e:  # noqa: BLE001  # the query has ended; its stop must too
                logger.warning(
                    "table %s: closing the publisher's Kafka clients failed: %s",
                    self.program.name,
                    e,
                )

    def _stop_requested(self, batch_id: int) -> StopRequested:
        return StopRequested(f"table {self.program.name}: stop requested before batch {batch_id}")

    @contextmanager
    def _slot(self, batch_id: int) -> Iterator[None]:
        """The run's `BatchGate` slot for this batch (none without a gate). Waited for
        outside `lock`, so a stop is not held up by a batch that has not begun."""
        if self.gate is None:
            yield
            return
        try:
            with self.gate.slot(self.depth, cancelled=lambda: self.stopping, key=self) as waited:
                self.stats.gate_seconds += waited
                yield
        except GateClosed:
            raise self._stop_requested(batch_id) from None

    def _restore_active_session(self) -> None:
        """Make `session` the process's active session again after a batch.

        pyspark's `createDataFrame` makes its session the active one for the whole
        process (a class attribute, not per thread), and a batch's session is the
        query's own clone, which the native SCD2 and tombstone paths create frames on.
        Left there, `SparkSession.getActiveSession()` (and so `get_session`) in the
        caller's thread would return a streaming query's clone, with that query's
        settings, instead of the session the caller started the pipeline with."""
        if self.session is None:
            return
        from pyspark.sql import SparkSession

        SparkSession._activeSession = self.session

    def stop_at_batch_boundary(self, query: StreamingQuery, *, timeout: float = 120) -> None:
        """Let the running batch finish and commit, then stop the query.

        `StreamingQuery.stop()` alone cancels the running batch's jobs and can
        interrupt it between our Delta commit and Spark's commit log (the replay
        would be skipped by the app transaction, but a clean stop is cheaper):
        so take the batch lock (no batch is writing), wait until Spark's commit
        log has the last batch we wrote, then stop, once the query is between
        triggers or its next batch has reached us (`stop_between_calls`); a trigger
        waiting in its source for new input is woken first (`wake_source`). A batch
        that starts after that fails without writing (`StopRequested`, once the stop
        has interrupted it: `wait_for_stop`) and is replayed next run.
        """
        with self.lock:
            self.stopping = True
            last = self.stats.last_batch
            if last is not None:
                marker = storage.join(self.program.plan.checkpoint_path, "commits", str(last))
                deadline = time.monotonic() + timeout
                while not storage.exists(marker) and query.isActive and time.monotonic() < deadline:
                    time.sleep(0.1)
        wake_source(self.program)
        stop_between_calls(query, self.refused, timeout=_PLANNING_WAIT)
        logger.info("table %s: query stopped after batch %s", self.program.name, last)

    # -- the batch -----------------------------------------------------------

    def _run(self, batch_df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        batch = BatchContext(self.program, batch_df, batch_id, may_replay=self._may_replay)
        try:
            name, out = self._write(batch)
            if self.program.dead_letters is not None:
                self._send_dead_letters(batch_id)
            if self.program.publish is not None:
                self._publish(batch_id)
        finally:
            batch.close()
        self._may_replay = False
        self._count(batch_id, name, out, batch.warned, time.monotonic() - started)

    def _write(self, batch: BatchContext) -> tuple[str, Outcome]:
        """The batch through the first of the table's strategies that takes it; that
        strategy's name for the log ("" for the cached path) and its outcome."""
        for strategy in self.strategies:
            out = strategy.write(batch)
            if out is not None:
                return strategy.name, out
        raise AssertionError(f"table {self.program.name}: no strategy wrote the batch")

    def _count(
        self, batch_id: int, path: str, out: Outcome, warned: dict[str, int], elapsed: float
    ) -> None:
        s = self.stats
        s.batches += 1
        s.rows_in += out.rows_in
        if self.program.reads_kafka:
            # Exact records of the batch. Spark's numInputRows counts a source read twice
            # when a batch reads its records again (the quarantine pass of `one_pass`).
            s.input_rows[batch_id] = out.rows_in
        if out.version is not None:  # a replayed batch's rows are in the table already
            s.rows_written += out.written
        s.quarantined += out.quarantined
        s.dropped += out.dropped
        s.last_batch = batch_id
        if out.version is None:
            s.skipped += 1
        else:
            s.last_version = out.version
            for name, n in warned.items():
                s.warned[name] = s.warned.get(name, 0) + n
        s.batch_seconds += elapsed
        logger.info(
            "table %s: batch %d%s: %d rows in, %d written, %d quarantined, %d dropped, "
            "version %s, %.1fs",
            self.program.name,
            batch_id,
            f" ({path})" if path else "",
            out.rows_in,
            out.written,
            out.quarantined,
            out.dropped,
            "skipped (already committed)" if out.version is None else out.version,
            elapsed,
        )

    def _send_dead_letters(self, batch_id: int) -> None:
        """Quarantine table → dead-letter topic: its versions the topic has not received
        yet, as the original records (`streams.cdc.DeadLetters`), exactly once the way a
        published view is; a replayed batch sends nothing twice."""
        if self._dead_letters is None:
            self._dead_letters = self.program.new_dead_letter_publisher()
        result = self._dead_letters.publish()
        self._count_dead_letters(result.records)
        if not result.skipped:
            logger.info(
                "table %s: batch %d sent dead letters %s", self.program.name, batch_id, result
            )

    def _count_dead_letters(self, records: int) -> None:
        if self.stats.dead_letters is not None:
            self.stats.dead_letters += records

    def _publish(self, batch_id: int) -> None:
        """Table → compacted topic: the Delta versions the topic has not received yet.

        The table's `Publisher` remembers what it published (its position, committed with the records), so a
        replayed batch publishes nothing twice; it keeps its Kafka clients from one batch
        to the next (`close` ends them).
        """
        if self._publisher is None:
            self._publisher = self.program.new_publisher()
        result = self._publisher.publish()
        self.stats.published += int(getattr(result, "records", 0) or 0)
        logger.info("table %s: batch %d published %s", self.program.name, batch_id, result)
