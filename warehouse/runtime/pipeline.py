"""Run a project's tables: one-shot in dependency order, or continuously until a signal.

`Pipeline(project, spark, layer=..., tables=...)` uses the caller's session and
never creates one. `run(once=True)` runs each selected table to completion
(Trigger.AvailableNow) before its readers start, so `--layer all --once`
moves data through every layer. `run(once=False)` starts every query and
stops them all at a batch boundary on SIGINT/SIGTERM.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from warehouse.compile.plan import select_tables
from warehouse.compile.query import CompiledQuery, build_query, table_exists
from warehouse.runtime.errors import QueryFailedError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from warehouse.project import Project

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]


_EXC_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Failed)): (.+)$")


def root_cause_line(text: str) -> str:
    """The innermost `SomeError: message` line of a (JVM-wrapped) Python traceback text."""
    found = [
        m
        for m in (_EXC_LINE.match(line) for line in text.splitlines())
        if m and not m.group(1).startswith(("pyspark.", "py4j."))
    ]
    if found:
        name, message = found[-1].group(1), found[-1].group(2)
        return f"{name.rsplit('.', 1)[-1]}: {message.replace(' SQLSTATE: 38000', '').strip()}"
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else "unknown error"


@dataclass
class RunResult:
    """What one table's query did in this run."""

    table: str
    layer: str
    rows_read: int = 0
    rows_written: int = 0
    quarantined: int = 0
    dropped: int = 0
    batches: int = 0
    seconds: float = 0.0
    version: int | None = None
    published: int = 0
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        if self.skipped:
            return f"{self.table} [{self.layer}]: skipped ({self.skipped})"
        return (
            f"{self.table} [{self.layer}]: {self.batches} batch(es), {self.rows_read} rows in, "
            f"{self.rows_written} written, {self.quarantined} quarantined"
            + (f", {self.dropped} dropped" if self.dropped else "")
            + (f", {self.published} published" if self.published else "")
            + f", version {self.version if self.version is not None else '-'}"
            + f", {self.seconds:.1f}s"
        )


class Pipeline:
    """The selected tables of a project on one SparkSession.

    Concurrency: `run` is called from one thread; in continuous mode it installs
    SIGINT/SIGTERM handlers (main thread only) that only set an event.
    """

    def __init__(
        self,
        project: Project,
        spark: SparkSession,
        *,
        layer: str | None = None,
        tables: list[str] | None = None,
        progress: Progress | None = None,
        bootstrap: str | None = None,
    ) -> None:
        self.project = project
        self.spark = spark
        self.names = select_tables(project, layer=layer, tables=tables)
        self.progress = progress or (lambda line: logger.info("%s", line))
        self._bootstrap = bootstrap
        self._engines: dict[str, str] | None = None
        self._stop = threading.Event()

    # -- resolution ------------------------------------------------------------

    @property
    def engines(self) -> dict[str, str]:
        if self._engines is None:
            from warehouse.runtime.engines import resolve_engines

            self._engines = dict(resolve_engines(self.spark, self.project.config.engines))
        return self._engines

    def bootstrap(self) -> str | None:
        needs_kafka = any(
            self.project.tables[n].spec.source.kafka or self.project.tables[n].spec.publish
            for n in self.names
        )
        if self._bootstrap is None and needs_kafka:
            from warehouse.runtime.bootstrap import resolve_bootstrap

            self._bootstrap = resolve_bootstrap(self.project, start=True)
        return self._bootstrap

    def _missing_inputs(self, name: str) -> list[str]:
        spec = self.project.tables[name].spec
        return [
            t for t in spec.source.upstream_tables if not table_exists(self.project.table_path(t))
        ]

    def _build(self, name: str, *, once: bool) -> CompiledQuery:
        return build_query(
            self.project,
            name,
            self.spark,
            once=once,
            bootstrap=self.bootstrap(),
            engines=self.engines,
        )

    @staticmethod
    def _note_progress(cq: CompiledQuery, query: StreamingQuery) -> None:
        """Remember each batch's source row count (Spark keeps only the recent progress)."""
        for p in query.recentProgress:
            cq.stats.input_rows[int(p.batchId)] = int(p.numInputRows)

    def _result(self, cq: CompiledQuery, seconds: float) -> RunResult:
        s = cq.stats
        return RunResult(
            table=cq.plan.name,
            layer=cq.plan.layer,
            rows_read=sum(s.input_rows.values()),
            rows_written=s.rows_written,
            quarantined=s.quarantined,
            dropped=s.dropped,
            batches=s.batches,
            seconds=seconds,
            version=s.last_version,
            published=s.published,
        )

    def _cleanup(self, cq: CompiledQuery) -> None:
        for view in cq.views:
            self.spark.catalog.dropTempView(view)

    @staticmethod
    def _failure(
        cq: CompiledQuery, query: StreamingQuery | None, e: BaseException | None
    ) -> QueryFailedError:
        cause = cq.stats.error or e
        if cause is not None and hasattr(cause, "exit_code"):
            return cause  # type: ignore[return-value]  # a WarehouseError from our code
        text = str(cause) if cause is not None else str(query.exception() if query else "")
        first = root_cause_line(text)
        err = QueryFailedError(
            f"Table `{cq.plan.name}` (layer `{cq.plan.layer}`): the streaming query failed: "
            f"{first}. Fix the cause and run again; the checkpoint "
            f"{cq.plan.checkpoint_path} resumes where the last committed batch ended.",
            table=cq.plan.name,
        )
        return err

    # -- running -----------------------------------------------------------------

    def run(self, once: bool = True) -> list[RunResult]:
        """Run the selected tables; returns one `RunResult` per table, in run order."""
        if once:
            return self._run_once()
        return self._run_continuous()

    def _run_once(self) -> list[RunResult]:
        results: list[RunResult] = []
        for name in self.names:
            layer = self.project.tables[name].layer
            missing = self._missing_inputs(name)
            if missing:
                r = RunResult(
                    table=name,
                    layer=layer,
                    skipped="no input table yet: " + ", ".join(missing),
                )
                self.progress(r.line())
                results.append(r)
                continue
            started = time.monotonic()
            cq = self._build(name, once=True)
            self.progress(f"{name} [{layer}]: running once from {cq.plan.source}")
            query = cq.start()
            try:
                query.awaitTermination()
            except Exception as e:
                raise self._failure(cq, query, e) from (cq.stats.error or e)
            finally:
                self._cleanup(cq)
            if cq.stats.error is not None:
                raise self._failure(cq, query, None) from cq.stats.error
            self._note_progress(cq, query)
            r = self._result(cq, time.monotonic() - started)
            self.progress(r.line())
            results.append(r)
        return results

    def request_stop(self) -> None:
        """Ask a continuous run to stop (what SIGINT/SIGTERM do)."""
        self._stop.set()

    def _run_continuous(self) -> list[RunResult]:
        previous = self._install_signals()
        running: dict[str, tuple[CompiledQuery, StreamingQuery, float]] = {}
        pending = list(self.names)
        failure: BaseException | None = None
        try:
            while True:
                for name in list(pending):
                    if self._missing_inputs(name):
                        continue
                    cq = self._build(name, once=False)
                    cq.batch.on_batch = lambda b, cq=cq: self._batch_line(cq, b)
                    running[name] = (cq, cq.start(), time.monotonic())
                    pending.remove(name)
                    self.progress(f"{name} [{cq.plan.layer}]: started ({cq.plan.trigger})")
                for cq, q, _ in running.values():
                    self._note_progress(cq, q)
                    if not q.isActive:
                        failure = self._failure(cq, q, q.exception())
                        break
                if failure is not None or self._stop.wait(1.0):
                    break
        except KeyboardInterrupt:
            pass
        finally:
            self._restore_signals(previous)
            results = self._stop_all(running)
        if failure is not None:
            raise failure
        for name in pending:
            results.append(
                RunResult(
                    table=name,
                    layer=self.project.tables[name].layer,
                    skipped="input never appeared",
                )
            )
        return results

    def _batch_line(self, cq: CompiledQuery, batch_id: int) -> None:
        s = cq.stats
        self.progress(
            f"{cq.plan.name}: batch {batch_id} done ({s.rows_written} rows written, "
            f"{s.quarantined} quarantined so far)"
        )

    def _stop_all(
        self, running: dict[str, tuple[CompiledQuery, StreamingQuery, float]]
    ) -> list[RunResult]:
        results = []
        # Readers first, so that no query waits on an upstream that already stopped.
        for name in reversed(list(running)):
            cq, q, started = running[name]
            cq.stop_at_batch_boundary(q)
            self._note_progress(cq, q)
            self._cleanup(cq)
            r = self._result(cq, time.monotonic() - started)
            self.progress(f"stopped: {r.line()}")
            results.append(r)
        results.reverse()
        return results

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda signum, frame: self._on_signal(signum))
        return previous

    def _on_signal(self, signum: int) -> None:
        logger.info("received %s: stopping at the next batch boundary", signal.Signals(signum).name)
        self._stop.set()

    @staticmethod
    def _restore_signals(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
