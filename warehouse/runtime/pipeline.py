"""Run a project's tables: one-shot in dependency order, or continuously until a signal.

`Pipeline(project, spark, layer=..., tables=...)` uses the caller's session and
never creates one. `run(once=True)` runs each selected table to completion
(Trigger.AvailableNow) before its readers start, so `--layer all --once`
moves data through every layer; tables that do not read each other run side by
side. `run(once=False)` starts every query and stops them all at a batch boundary
on SIGINT/SIGTERM.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streams.sessions import is_connect
from warehouse.compile.plan import source_text
from warehouse.errors import WarehouseError
from warehouse.runtime.catalog import Registrar, require_delta, require_metastore
from warehouse.runtime.changes import record_fingerprint, refuse_changed
from warehouse.runtime.checkpoints import (
    refuse_interrupted_recover,
    refuse_new_over_table,
    refuse_other_engine,
)
from warehouse.runtime.errors import QueryFailedError, TableBusyError
from warehouse.runtime.failures import (
    RetryPolicy,
    build_failure,
    is_transient,
    query_failure,
)
from warehouse.runtime.gate import BatchGate, depths
from warehouse.runtime.live import LiveQuery, may_start, note_progress, once_slots
from warehouse.runtime.locks import holding
from warehouse.runtime.query import TableQuery, build_query
from warehouse.runtime.refresh import refresh_selection, refuse_data_loss, reset_for_refresh
from warehouse.runtime.results import (
    RunResult,
    add_results,
    dead_letters_text,
    result_of,
    warned_text,
)
from warehouse.runtime.run_state import RunStates
from warehouse.runtime.writer import BatchWriter
from warehouse.spec.paths import table_exists
from warehouse.spec.table import DEFAULT_CLUSTER, KafkaSource, TopicSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from warehouse.compile.engines import ResolvedEngines
    from warehouse.compile.program import TableProgram
    from warehouse.spec.model import LoadedProject

Query = TableQuery

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]


def refuse_unrunnable(project: LoadedProject, names: list[str]) -> None:
    """The refusals of a run that need no session, so that a caller may ask them before
    Spark starts: a checkpoint a `warehouse recover` was replacing when it stopped, a new
    checkpoint over a table that holds batches (`NewCheckpointError`), a table changed so
    that it needs a full refresh it is not given (`DefinitionChangedError`).
    `Pipeline.run` asks them again, after a full refresh's resets."""
    refuse_interrupted_recover(project, names)
    refuse_new_over_table(project, names)
    refuse_changed(project, names)


@dataclass
class _Once:
    """A table of a `--once` run, from its turn to its result."""

    name: str
    layer: str
    source: str
    """Where it starts reading, read before its first start."""
    started: float
    attempt: int = 0
    due: float = 0.0
    """When a start that failed transiently is started again."""
    cq: Query | None = None
    query: StreamingQuery | None = None
    error: BaseException | None = None
    """What the query's end raised."""
    earlier: RunResult | None = None
    """What the attempts before this one did."""


LOOK_EVERY = 0.5
"""Seconds between a continuous run's looks at its queries while a table waits to start."""

STEADY_LOOK_EVERY = 1.0
"""The same once every table has started: a look costs the run's process and the JVM
CPU whether anything happened or not (docs/decisions/0082), and a failed batch, the one
thing a look must act on soon, ends the run within this long."""

REGISTER_EVERY = 5.0
"""Seconds between a continuous run's looks for tables to register in the catalog: a
table's name appears within this long of its first commit, and a quarantine that never
fills costs one existence check (a listing on object storage) per interval."""


class Pipeline:
    """The selected tables of a project on one SparkSession.

    Continuous mode starts one query at a time, in dependency order, the next once
    the previous one has created its sources (at most `settle_seconds`): each Python
    data source starts a Python worker that must connect back to the JVM within
    Spark's fixed 10 s, which a small machine starting twelve at once misses. A query
    that fails with that error (`is_transient`) is started again after a pause
    (`retry`); any other failure stops every query and is raised naming the table.

    Concurrency: `run` is called from one thread; in continuous mode it installs
    SIGINT/SIGTERM handlers (main thread only) that only set an event.
    """

    def __init__(
        self,
        project: LoadedProject,
        spark: SparkSession,
        *,
        layer: str | None = None,
        tables: list[str] | None = None,
        progress: Progress | None = None,
        bootstrap: str | None = None,
        batch_progress: Progress | None = None,
        retry: RetryPolicy | None = None,
        settle_seconds: float = 60.0,
        full_refresh: list[str] | None = None,
        full_refresh_all: bool = False,
        allow_data_loss: bool = False,
    ) -> None:
        self.project = project
        self.spark = spark
        selection = refresh_selection(
            project,
            layer=layer,
            tables=tables,
            full_refresh=full_refresh or (),
            full_refresh_all=full_refresh_all,
        )
        self.names = selection.names
        self.resets = selection.reset
        """The tables the run resets before it starts any query (a full refresh)."""
        self.allow_data_loss = allow_data_loss
        self._recorded: set[str] = set()
        self.progress = progress or (lambda line: logger.info("%s", line))
        self.batch_progress = batch_progress
        """Where the continuous mode's per-batch lines go (default: `progress`)."""
        self.retry = retry or RetryPolicy()
        self.settle_seconds = settle_seconds
        self._bootstrap = bootstrap
        self._bootstrap_given = bootstrap
        self._resolved = False
        self._engines: ResolvedEngines | None = None
        self._stop = threading.Event()
        self._lost: Exception | None = None
        self._gate: BatchGate | None = None
        self._states = RunStates(project, mode="continuous")
        """The run's tables' state records (`warehouse.runtime.run_state`)."""
        self._registrar = Registrar(spark, project, [])
        """Registers the run's tables in the session's catalog as they appear (`catalog:`)."""
        self._depths = depths(
            {n: project.graph.upstream(n, static=False) for n in project.graph.nodes}
        )

    # -- resolution ------------------------------------------------------------

    @property
    def engines(self) -> ResolvedEngines:
        if self._engines is None:
            from warehouse.runtime.engines import resolve_engines

            self._engines = resolve_engines(self.spark, self.project.config.engines)
        return self._engines

    def bootstrap(self) -> str | None:
        """The default cluster's bootstrap, resolved once per run: an `embedded` one starts
        the bundled broker, and only when a table of the run reads or writes the default
        cluster (None otherwise). Unless the caller gave the bootstrap, the first call also
        checks every cluster the run's tables read (`_check_reachable`, `_check_topics`)."""
        if self._bootstrap_given is None and not self._resolved:
            clusters = {c for n in self.names for c in self.project.tables[n].kafka_clusters}
            if self._bootstrap is None and DEFAULT_CLUSTER in clusters:
                from warehouse.runtime.bootstrap import resolve_bootstrap

                self._bootstrap = resolve_bootstrap(self.project, start=True)
            if clusters:
                self._check_reachable(self._bootstrap)
                self._check_topics(self._bootstrap)
            self._resolved = True  # a failed check is asked again on the next call
        return self._bootstrap

    def _check_reachable(self, bootstrap: str | None) -> None:
        """Once per run, before any query starts: each configured Kafka cluster the run's
        tables read answers (with the first of its tables' client settings), or the run
        fails in seconds. An `embedded` default cluster was just started: not asked."""
        from warehouse.runtime.bootstrap import check_reachable

        kafka = self.project.config.kafka
        asked = {DEFAULT_CLUSTER} if kafka.is_embedded else set()
        for name in self.names:
            defn = self.project.tables[name]
            src = defn.spec.source
            if not isinstance(src, TopicSource):
                continue
            for cluster in src.kafka.cluster_list:
                if cluster in asked:
                    continue
                asked.add(cluster)
                servers = kafka.bootstrap_of(cluster, bootstrap)
                if servers:
                    config = kafka.client_config(src.kafka.options, cluster=cluster)
                    check_reachable(servers, config, table=name, layer=defn.layer, cluster=cluster)

    def _check_topics(self, bootstrap: str | None) -> None:
        """Once per run, before any query starts: every topic a table names (`topic`,
        `topics`; a `pattern` may match none) exists. Spark's Kafka reader fails a query
        on a missing topic with the broker's "does not host this topic-partition", and the
        Python engines' reader would run it as an empty one, so a misspelt topic or a
        topic not created yet fails the run here, on both, naming the table and its file."""
        from warehouse.runtime.bootstrap import listed_topics

        kafka = self.project.config.kafka
        # one listing per cluster and distinct client settings
        listed: dict[tuple, set[str] | None] = {}
        for name in self.names:
            defn = self.project.tables[name]
            if not isinstance(defn.spec.source, TopicSource) or not defn.spec.source.topics:
                continue
            k = defn.spec.source.kafka
            for cluster in k.cluster_list:
                servers = kafka.bootstrap_of(cluster, bootstrap)
                if not servers:
                    continue
                config = kafka.client_config(k.options, cluster=cluster)
                key = (servers, *sorted(config.items()))
                if key not in listed:
                    listed[key] = listed_topics(servers, config)
                self._refuse_absent(name, k, servers, listed[key])

    def _refuse_absent(
        self, name: str, k: KafkaSource, servers: str, topics: set[str] | None
    ) -> None:
        """Fail the run when a topic `name` reads is not among `servers`' `topics`."""
        defn = self.project.tables[name]
        absent = [] if topics is None else [t for t in k.topic_list if t not in topics]
        if absent:
            raise QueryFailedError(
                f"Table `{name}` ({defn.path}) reads Kafka topic `{absent[0]}`, which "
                f"does not exist on `{servers}`. Create it, or produce to it first "
                f"(`warehouse produce --topic {absent[0]} FILE`: a broker with "
                "`auto.create.topics.enable`, as the bundled one, creates it), or correct "
                f"`source.kafka.{'topic' if k.topic else 'topics'}`.",
                table=name,
                layer=defn.layer,
            )

    def _missing_inputs(self, name: str, *, snapshots: bool = False) -> list[str]:
        """Input tables of `name` with no Delta table yet; `snapshots`: also the tables its
        SQL reads as a snapshot (a continuous run waits for them; once mode reports them)."""
        defn = self.project.tables[name]
        inputs = list(defn.spec.source.upstream_tables)
        if snapshots:
            inputs += [t for t in defn.static_tables if t in self.project.tables]
        return [t for t in inputs if not table_exists(self.project.table_path(t))]

    def _build(
        self, name: str, *, once: bool, bootstrap: str | None, engines: ResolvedEngines
    ) -> Query:
        def writer(program: TableProgram) -> BatchWriter:
            return BatchWriter(
                program,
                session=self.spark,
                gate=self._gate,
                depth=self._depths.get(program.name, 0),
            )

        return build_query(
            self.project,
            name,
            self.spark,
            engines=engines,
            once=once,
            bootstrap=bootstrap,
            writer=writer,
        )

    @property
    def gate(self) -> BatchGate | None:
        """The running (or last) continuous run's `BatchGate`; None without a limit."""
        return self._gate

    def _batch_gate(self) -> BatchGate | None:
        """The continuous run's `BatchGate` (`spark.concurrent_batches`), or None for no
        limit: `auto` is the cores of a local master. On Spark Connect the server runs
        each query's batches in a worker of its own, where no gate of this process
        reaches: no gate."""
        slots = self.project.config.spark.concurrent_batches
        if is_connect(self.spark):
            if slots not in ("auto", 0):
                logger.warning(
                    "`spark.concurrent_batches: %s` is not enforced on a Spark Connect "
                    "session: the server runs each query's batches",
                    slots,
                )
            return None
        if slots == "auto":
            from warehouse.runtime.session import local_cores

            slots = local_cores(str(self.spark.conf.get("spark.master", ""))) or 0
        if not slots:
            return None
        logger.info(
            "continuous run: at most %d batch(es) write at once, deepest table first", slots
        )
        return BatchGate(slots)

    def _cleanup(self, cq: Query) -> None:
        cq.release(self.spark)

    # -- running -----------------------------------------------------------------

    def run(self, once: bool = True) -> list[RunResult]:
        """Run the selected tables; returns one `RunResult` per table, in run order.
        A full refresh first resets its tables (`DataLossRefusedError` where a topic no
        longer holds what a table was read from). Before any query starts, the run fails
        when another process runs (or resets) one of them (`TableBusyError`), a checkpoint
        was written by the other Delta engine, a checkpoint is new while its table already
        holds batches (`NewCheckpointError`), or a table changed so that it needs a full
        refresh it is not given (`DefinitionChangedError`)."""
        with holding(self.project, self.names, doing="run", on_lost=self._lease_lost):
            require_delta(self.spark, self.project)
            require_metastore(self.spark, self.project)
            self._full_refresh()  # a reset is also a way out of what the checks refuse
            refuse_other_engine(self.project, self.names, self.engines.delta.name)
            refuse_unrunnable(self.project, self.names)
            self._registrar = Registrar(self.spark, self.project, self.names)
            self._registrar.check()  # tables written before `catalog:` was set
            self._states = RunStates(self.project, mode="once" if once else "continuous")
            try:
                if once:
                    return self._run_once()
                return self._run_continuous()
            finally:
                self._states.stop_all()

    def _full_refresh(self) -> None:
        """Reset the tables of a full refresh, after refusing one whose topic no longer
        holds what its rows were read from (unless `allow_data_loss`)."""
        if not self.resets:
            return
        if not self.allow_data_loss:
            kafka = [
                n
                for n in self.resets
                if isinstance(self.project.tables[n].spec.source, TopicSource)
            ]
            if kafka:
                refuse_data_loss(self.project, kafka, self.bootstrap())
        removed = reset_for_refresh(self.project, self.resets, spark=self.spark)
        self.progress(
            "full refresh: reset "
            + ", ".join(self.resets)
            + f" ({len(removed)} locations removed); rebuilding them from their inputs"
        )

    def _record(self, name: str) -> None:
        """Record what `name`'s query ran on, once per run (`warehouse plan` compares it)."""
        if name not in self._recorded:
            record_fingerprint(self.project, name)
            self._recorded.add(name)

    def _start(
        self, name: str, *, once: bool
    ) -> tuple[Query, StreamingQuery | None, BaseException | None]:
        """Build and start `name`'s query; a start that raises is returned, not raised.

        A build that fails raises: a `WarehouseError` as it is, anything else (an input
        table Delta cannot read, a source refusing its options) as a `QueryFailedError`
        naming the table. The broker and the engines are resolved before, so that their
        own errors are not blamed on the table."""
        bootstrap, engines = self.bootstrap(), self.engines
        try:
            cq = self._build(name, once=once, bootstrap=bootstrap, engines=engines)
        except WarehouseError:
            raise
        except Exception as e:  # the table's error boundary: named, chained
            defn = self.project.tables[name]
            inputs = [
                f"table `{t}` at {self.project.table_path(t)}"
                for t in [*defn.spec.source.upstream_tables, *defn.static_tables]
                if t in self.project.tables
            ]
            inputs += [f"topic `{t}`" for t in defn.spec.source.topics]
            raise build_failure(name, defn.layer, e, inputs=inputs) from e
        cq.writer.on_batch = lambda b, cq=cq: self._batch_done(cq, b, once=once)
        try:
            query = cq.start()
            self._states.started(name)
            return cq, query, None
        except Exception as e:  # noqa: BLE001  # judged by the caller: transient or real
            self._cleanup(cq)
            return cq, None, e

    def _retry_pause(self, name: str, attempt: int, error: BaseException | None) -> float | None:
        """Seconds to wait before start number `attempt + 1` of `name`, or None: do not retry."""
        if not is_transient(error) or attempt >= self.retry.attempts:
            return None
        pause = self.retry.pause_before(attempt + 1)
        line = (
            f"{name}: query failed to start its Python worker in time (attempt {attempt} of "
            f"{self.retry.attempts}; Spark allows a new worker 10 s to connect back and the "
            f"machine is busy); starting it again in {pause:.0f}s"
        )
        logger.warning("%s", line)
        self.progress(line)
        return pause

    def _run_once(self) -> list[RunResult]:
        """Run each table to its end (Trigger.AvailableNow), starting it once every table of
        the run that it reads has ended, with at most `_once_slots()` queries running: the
        fixed costs of one query (its start, planning, a Python source's process, its
        commits) overlap another's batches. A start that failed transiently is started
        again after its pause while the others run. The first real failure stops the
        queries still running (each is exactly-once: a stop mid-batch replays the batch
        next run) and is raised. Results are in run order."""
        slots = self._once_slots()
        needs = {
            n: {u for u in self.project.graph.upstream(n) if u in self.names} for n in self.names
        }
        waiting = list(self.names)  # not started yet, in run order
        pausing: dict[str, _Once] = {}  # failed transiently, started again at `due`
        live: dict[str, _Once] = {}
        done: dict[str, RunResult] = {}
        try:
            while waiting or pausing or live:
                self._once_start_ready(slots, needs, waiting, pausing, live, done)
                if not live:
                    if pausing:
                        due = min(t.due for t in pausing.values())
                        time.sleep(max(0.0, due - time.monotonic()))
                    continue
                for name, t in list(live.items()):
                    if self._once_running(t, wait=0.5 / len(live)):
                        continue
                    del live[name]
                    r = self._once_end(t)
                    if r is None:
                        pausing[name] = t
                    else:
                        done[name] = r
                self._states.beat()
        finally:
            self._stop_once(live)
        return [done[n] for n in self.names]

    def _once_start_ready(
        self,
        slots: int | None,
        needs: dict[str, set[str]],
        waiting: list[str],
        pausing: dict[str, _Once],
        live: dict[str, _Once],
        done: dict[str, RunResult],
    ) -> None:
        """Start, in run order while a slot is free, each table whose turn came (every
        table of the run it reads has ended) and that is not pausing after a failed
        start; one with a missing input table is done, skipped."""
        now = time.monotonic()
        for name in self.names:
            if slots is not None and len(live) >= slots:
                return
            ready = name in waiting or (name in pausing and pausing[name].due <= now)
            if not ready or not needs[name] <= done.keys():
                continue
            if name in waiting:
                waiting.remove(name)
                t = self._once_begin(name, done)
                if t is None:
                    continue
            else:
                t = pausing.pop(name)
            if self._once_start(t):
                live[name] = t
            else:
                pausing[name] = t

    def _once_slots(self) -> int | None:
        """How many queries of a `--once` run run at once (`once_slots`), for this session's
        master: Spark Connect has none this process can read."""
        master = None if is_connect(self.spark) else str(self.spark.conf.get("spark.master", ""))
        return once_slots(self.project.config.spark.concurrent_batches, master)

    def _once_begin(self, name: str, done: dict[str, RunResult]) -> _Once | None:
        """A table's turn: its skipped result when an input table does not exist (every
        table of the run it reads has ended), or its state before its first start."""
        self._refuse_lost(name)
        layer = self.project.tables[name].layer
        missing = self._missing_inputs(name)
        if missing:
            r = RunResult(
                table=name, layer=layer, skipped="no input table yet: " + ", ".join(missing)
            )
            self.progress(r.line())
            done[name] = r
            return None
        # Where it starts, read before the query writes its first offsets.
        source = source_text(
            self.project.tables[name], checkpoint=self.project.checkpoint_path(name)
        )
        return _Once(name, layer, source, started=time.monotonic())

    def _once_start(self, t: _Once) -> bool:
        """Start `t`'s query; False when the start failed transiently (`t.due` says when to
        start it again). A real failure is raised."""
        t.attempt += 1
        t.cq, t.query, error = self._start(t.name, once=True)
        if t.attempt == 1:
            self.progress(f"{t.name} [{t.layer}]: running once from {t.source}")
        if t.query is not None:
            return True
        self._once_failed(t, error)
        return False

    def _once_running(self, t: _Once, *, wait: float) -> bool:
        """Whether `t`'s query still runs, waiting at most `wait` seconds for its end (an
        end with an exception is kept in `t.error`). A running query whose writer failed,
        or whose run lost its lease, is stopped."""
        assert t.cq is not None and t.query is not None
        try:
            if t.query.awaitTermination(wait):
                return False
        except Exception as e:  # noqa: BLE001  # judged by `_once_end`: transient or real
            t.error = e
            return False
        if t.cq.writer.failed.is_set() or self._lost is not None:
            t.query.stop()  # it waits to be stopped
        t.cq.refresh_snapshots()
        return True

    def _once_end(self, t: _Once) -> RunResult | None:
        """`t`'s query ended: its result, or None when it failed transiently (`t.due` says
        when to start it again); a real failure is raised."""
        assert t.cq is not None and t.query is not None
        self._cleanup(t.cq)
        note_progress(t.cq, t.query.recentProgress)
        self._refuse_lost(t.name)
        error = t.cq.writer.stats.error or t.error
        if error is None:
            return self._once_done(t)
        self._once_failed(t, error)
        t.error = None
        return None

    def _once_failed(self, t: _Once, error: BaseException | None) -> None:
        """Schedule `t`'s next start after a transient failure, or raise the failure."""
        assert t.cq is not None
        pause = self._retry_pause(t.name, t.attempt, error)
        if pause is None:
            raise self._failure(t.cq, t.query, error) from error
        t.earlier = add_results(t.earlier, result_of(t.cq.plan, t.cq.writer.stats, 0.0))
        t.due = time.monotonic() + pause

    def _once_done(self, t: _Once) -> RunResult:
        """`t`'s query ended well: its state, fingerprint, catalog entry and result line."""
        assert t.cq is not None
        r = add_results(
            t.earlier, result_of(t.cq.plan, t.cq.writer.stats, time.monotonic() - t.started)
        )
        self._states.stopped(t.name)
        self._record(t.name)
        self._registrar.check()
        self.progress(r.line())
        return r

    def _stop_once(self, live: dict[str, _Once]) -> None:
        """Stop the queries still running after another table's failure, and release them."""
        for t in live.values():
            assert t.cq is not None and t.query is not None
            try:
                t.query.stop()
            except Exception as e:  # noqa: BLE001  # the run's own failure is what is raised
                logger.warning("%s: stopping its query after the run failed: %s", t.name, e)
            self._cleanup(t.cq)

    def request_stop(self) -> None:
        """Ask a continuous run to stop (what SIGINT/SIGTERM do)."""
        self._stop.set()

    def _lease_lost(self, error: Exception) -> None:
        """A table's lease on object storage went to another process: stop the run
        (the lease logged why)."""
        self._lost = error
        self.request_stop()

    def _refuse_lost(self, name: str) -> None:
        """A `--once` run whose lease was lost stops its query and runs nothing more."""
        if self._lost is not None:
            raise TableBusyError(
                f"The run stopped at table `{name}`: {self._lost}. Another process holds "
                "its tables now; see `warehouse status` before running them again.",
                table=name,
            ) from self._lost

    def _run_continuous(self) -> list[RunResult]:
        """Start the queries one at a time in dependency order, each once the previous one
        has initialized its sources; restart one that failed transiently; stop all on a
        signal or on the first real failure."""
        self._gate = self._batch_gate()
        previous = self._install_signals()
        live: dict[str, LiveQuery] = {}
        waiting: dict[str, tuple[float, int]] = {n: (0.0, 1) for n in self.names}
        earlier: dict[str, RunResult] = {}
        first_start: dict[str, float] = {}
        failure: QueryFailedError | None = None
        try:
            while failure is None and not self._stop.is_set():
                failure = self._watch(live, waiting, earlier)
                if failure is None and may_start(live, waiting, self.settle_seconds):
                    failure = self._start_next(live, waiting, first_start)
                if failure is None:
                    self._registrar.check(every=REGISTER_EVERY)
                    self._states.beat()
                    self._stop.wait(LOOK_EVERY if waiting else STEADY_LOOK_EVERY)
        except KeyboardInterrupt:
            pass
        finally:
            # The handlers stay until every query has stopped: a second signal (Ctrl-C
            # pressed again, or `timeout` signalling the process and then its group)
            # must not interrupt the stop between a batch's Delta commit and its commit log.
            try:
                results = self._stop_all(live, earlier, first_start)
            finally:
                self._restore_signals(previous)
        if failure is not None:
            raise failure
        self._registrar.check()  # what committed since the last look
        if self.names:
            self._refuse_lost(self.names[0])
        for name in [n for n in waiting if n not in earlier]:
            missing = self._missing_inputs(name, snapshots=True)
            results.append(
                RunResult(
                    table=name,
                    layer=self.project.tables[name].layer,
                    skipped="input never appeared: " + ", ".join(missing)
                    if missing
                    else "stopped before its turn to start",
                )
            )
        return results

    def _watch(
        self,
        live: dict[str, LiveQuery],
        waiting: dict[str, tuple[float, int]],
        earlier: dict[str, RunResult],
    ) -> QueryFailedError | None:
        """Note progress; a query that stopped is rescheduled (transient) or the run's failure."""
        for name, q in list(live.items()):
            q.note_progress()
            if q.running(time.monotonic()):
                q.cq.refresh_snapshots()
                if q.noted_to is not None:  # a trigger ran on the checkpoint
                    self._record(name)
                continue
            if self._stop.is_set():  # stopped by the signal's race, not by a failure
                return None
            error = q.cq.writer.stats.error or q.query.exception()
            pause = self._retry_pause(name, q.attempt, error)
            if pause is None:
                return self._failure(q.cq, q.query, error)
            # A failed batch: stop what is left.
            q.cq.writer.stop_at_batch_boundary(q.query, timeout=10)
            self._cleanup(q.cq)
            earlier[name] = add_results(
                earlier.get(name), result_of(q.cq.plan, q.cq.writer.stats, 0.0)
            )
            del live[name]
            waiting[name] = (time.monotonic() + pause, q.attempt + 1)
        return None

    def _start_next(
        self,
        live: dict[str, LiveQuery],
        waiting: dict[str, tuple[float, int]],
        first_start: dict[str, float],
    ) -> QueryFailedError | None:
        """Start the first waiting table (dependency order) that is due and has its inputs."""
        now = time.monotonic()
        for name in self.names:
            if name not in waiting or waiting[name][0] > now:
                continue
            if self._missing_inputs(name, snapshots=True):
                continue
            attempt = waiting.pop(name)[1]
            cq, query, error = self._start(name, once=False)
            first_start.setdefault(name, now)
            if query is not None:
                live[name] = LiveQuery(cq, query, now, attempt)
                self.progress(f"{name} [{cq.plan.layer}]: started ({cq.plan.trigger})")
                return None
            pause = self._retry_pause(name, attempt, error)
            if pause is None:
                return self._failure(cq, None, error)
            waiting[name] = (now + pause, attempt + 1)
            return None
        return None

    def _failure(
        self, cq: Query, query: StreamingQuery | None, error: BaseException | None
    ) -> QueryFailedError:
        """What a table's failed query is reported with; a start over names the tables
        that read it as a stream too."""
        readers = self.project.graph.stream_readers(cq.plan.name)
        self._states.failed(cq.plan.name, cq.writer.stats.error or error)
        return query_failure(cq.plan, cq.writer.stats, query, error, readers=readers)

    def _batch_done(self, cq: Query, batch_id: int, *, once: bool) -> None:
        self._states.batch(cq.plan.name, batch_id, cq.writer.stats)
        if not once:
            self._batch_line(cq, batch_id)

    def _batch_line(self, cq: Query, batch_id: int) -> None:
        s = cq.writer.stats
        (self.batch_progress or self.progress)(
            f"{cq.plan.name}: batch {batch_id} done ({s.rows_written} rows written, "
            f"{s.quarantined} quarantined{warned_text(s.warned)}"
            f"{dead_letters_text(s.dead_letters)} so far)"
        )

    def _stop_all(
        self,
        live: dict[str, LiveQuery],
        earlier: dict[str, RunResult],
        first_start: dict[str, float],
    ) -> list[RunResult]:
        results = []
        now = time.monotonic()
        # All at once: each stop waits for its query's running batch, so one after the
        # other takes the sum of twelve batches (over a minute on a busy 2-core machine).
        if live:
            with ThreadPoolExecutor(len(live), thread_name_prefix="warehouse-stop") as pool:
                for done in [
                    pool.submit(q.cq.writer.stop_at_batch_boundary, q.query) for q in live.values()
                ]:
                    done.result()
        for name in reversed(list(live)):
            q = live[name]
            q.note_progress()
            self._cleanup(q.cq)
            if q.cq.writer.stats.error is None and q.query.exception() is None:
                self._record(name)
            r = add_results(
                earlier.pop(name, None),
                result_of(q.cq.plan, q.cq.writer.stats, time.monotonic() - first_start[name]),
            )
            self.progress(f"stopped: {r.line()}")
            results.append(r)
        results.reverse()
        # Tables whose last attempt failed transiently and had not started again.
        results += [
            add_results(r, RunResult(r.table, r.layer, seconds=now - first_start[n]))
            for n, r in earlier.items()
        ]
        return results

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda signum, frame: self._on_signal(signum))
        return previous

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self._stop.is_set():
            logger.warning("received %s: already stopping at a batch boundary", name)
        else:
            logger.info("received %s: stopping at the next batch boundary", name)
        self._stop.set()

    @staticmethod
    def _restore_signals(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
