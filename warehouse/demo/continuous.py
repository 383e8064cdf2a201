"""`warehouse demo --continuous`: the pipeline keeps running while events keep coming.

One generator timeline: its first `initial_events` events (event times just before
now) are produced at once and run through every layer once, so that every table,
and the dimension snapshots the DWD join reads, exist; then the runtime's continuous
runner starts every query (one at a time, upstream first, restarting one whose Python
worker missed Spark's connect window) while a producer thread sends the rest of the
timeline at `rate` events per second, and a display thread reprints the ADS tables
every few seconds, until Ctrl-C (or SIGTERM) stops the queries at a batch boundary:
the demo then prints what each query did and the summary, and exits 0. (Ctrl-C during
the first run of every layer interrupts it: exit status 130.)

The DWD order table joins the user and product dimensions as of its query's start
(stream-static join): users created while it runs show as `unknown` city until the
next start.
"""

from __future__ import annotations

import collections
import datetime as dt
import itertools
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warehouse.demo.run import (
    DemoResult,
    Out,
    ads_rows,
    ads_tables,
    collect_summary,
    render_summary,
    render_table,
    reset_state,
    run_once,
)
from warehouse.generate import ProduceStats, Record, ShopGenerator, ensure_topics, produce_records
from warehouse.spec.paths import table_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from warehouse.project import Project
    from warehouse.runtime.results import RunResult

logger = logging.getLogger(__name__)


def split_timeline(
    records: Iterator[Record], until: float
) -> tuple[list[Record], Iterator[Record]]:
    """The records up to `until` seconds, and an iterator over the rest."""
    head: list[Record] = []
    for rec in records:
        if rec.at > until:
            return head, itertools.chain([rec], records)
        head.append(rec)
    return head, iter(())


class Producer(threading.Thread):
    """Sends the rest of the timeline in real time until `stop` is set."""

    def __init__(
        self,
        bootstrap: str,
        records: Iterator[Record],
        *,
        pace_from: float,
        client_config: dict[str, str],
    ) -> None:
        super().__init__(name="demo-producer", daemon=True)
        self.bootstrap = bootstrap
        self.records = records
        self.pace_from = pace_from
        self.client_config = client_config
        self.stop = threading.Event()
        self.stats = ProduceStats()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.stats = produce_records(
                self.bootstrap,
                self.records,
                pace_from=self.pace_from,
                client_config=self.client_config,
                stop=self.stop,
                progress=self._note,
                progress_every=10,
            )
        except BaseException as e:  # noqa: BLE001  # a thread's boundary: reported by the display and at the end
            self.error = e
            logger.error("demo producer failed: %s", e)

    def _note(self, stats: ProduceStats) -> None:
        self.stats = stats


class Display(threading.Thread):
    """Reprints the ADS tables and row counts every `every` seconds."""

    def __init__(self, project: Project, producer: Producer, *, every: float, out: Out) -> None:
        super().__init__(name="demo-display", daemon=True)
        self.project = project
        self.producer = producer
        self.every = every
        self.out = out
        self.stop = threading.Event()
        self.started = time.monotonic()
        self.events: collections.deque[str] = collections.deque(maxlen=3)
        """The runner's latest lines (queries started, restarted); appended from its thread."""
        self.running: set[str] = set()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            try:
                self.out(self.screen())
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:  # noqa: BLE001  # a display refresh is best effort
                # A table being rewritten mid-read: skip this refresh. BaseException because
                # delta-rs reports a Rust panic as pyo3's PanicException, which is not an
                # Exception, and would end the screen for good.
                logger.warning("display refresh skipped: %s: %s", type(e).__name__, e)

    def screen(self) -> str:
        from streams.delta import table_info

        clear = "\x1b[2J\x1b[H" if sys.stdout.isatty() else "\n" + "=" * 78 + "\n"
        lines = [
            f"{clear}warehouse demo --continuous: {time.monotonic() - self.started:.0f}s, "
            f"{self.producer.stats.records} records produced; Ctrl-C stops",
            "",
        ]
        for name in ads_tables(self.project):
            lines += [render_table(name, ads_rows(self.project, name), limit=10), ""]
        counts = []
        for name in self.project.tables:
            path = self.project.table_path(name)
            if table_exists(path):
                counts.append(f"{name} {table_info(path).get('rows') or 0}")
        lines.append("rows: " + ", ".join(counts))
        lines.append(f"queries running: {len(self.running)} of {len(self.project.tables)}")
        lines += [f"  {line}" for line in list(self.events)]
        if self.producer.error is not None:
            lines.append(f"producer stopped: {self.producer.error}")
        return "\n".join(lines)


def _run_with_display(
    project: Project,
    spark: SparkSession,
    bootstrap: str,
    producer: Producer,
    display: Display,
) -> list[RunResult]:
    """Every query continuously until a signal, with `producer` producing and `display`
    showing the queries' state; both are stopped when the run ends."""

    def progress(line: str) -> None:
        logger.info("%s", line)
        display.events.append(line)
        table = line.split(" ", 1)[0].rstrip(":")
        if ": started (" in line:
            display.running.add(table)
        elif "starting it again" in line:
            display.running.discard(table)

    producer.start()
    display.start()
    # The runner starts the queries one at a time, upstream first, and restarts one whose
    # Python worker missed Spark's connect window; the screen shows how far it got.
    pipeline = project.pipeline(
        spark,
        "all",
        bootstrap=bootstrap,
        progress=progress,
        batch_progress=lambda line: logger.debug("%s", line),
    )
    try:
        return pipeline.run(once=False)
    finally:
        producer.stop.set()
        display.stop.set()
        producer.join(timeout=30)
        display.join(timeout=30)


def run_continuous(
    project: Project,
    spark: SparkSession,
    *,
    bootstrap: str,
    rate: float = 20.0,
    seed: int = 7,
    initial_events: int = 3000,
    delete_old_topics: bool = True,
    refresh: float = 5.0,
    out: Out = print,
) -> int:
    """Run the example continuously until Ctrl-C/SIGTERM; returns the exit code."""
    if rate <= 0:
        from warehouse.generate import GenerateArgumentError

        raise GenerateArgumentError(f"`--rate` must be > 0 events per second, got {rate}.")
    reset_state(project, bootstrap=bootstrap if delete_old_topics else None, out=out)
    client = project.config.kafka.client_config()
    ensure_topics(bootstrap, client_config=client)
    gap = 1.0 / rate
    span = initial_events * gap
    start = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=span)
    gen = ShopGenerator(seed=seed, start=start, seconds_per_event=gap)
    head, rest = split_timeline(gen.records(), span)
    out(f"producing the first {len(head)} records ({initial_events} events) to {bootstrap} ...")
    first = produce_records(bootstrap, head, client_config=client)
    out("running every layer once so that every table exists ...")
    t0 = time.monotonic()
    once = run_once(
        project,
        spark,
        bootstrap=bootstrap,
        progress=lambda line: out(f"  {time.monotonic() - t0:6.1f}s  {line}"),
    )

    producer = Producer(
        bootstrap, rest, pace_from=span + (time.monotonic() - t0), client_config=client
    )
    display = Display(project, producer, every=refresh, out=out)
    out(f"starting every query continuously; producing {rate:g} events/s; Ctrl-C stops")
    started = time.monotonic()
    results = _run_with_display(project, spark, bootstrap, producer, display)
    out("stopped: every query at a batch boundary; what each did while continuous:")
    for r in results:
        out(f"  {r.line()}")
    result = DemoResult(
        bootstrap=bootstrap,
        produced=ProduceStats(
            records=first.records + producer.stats.records,
            per_topic=first.per_topic + producer.stats.per_topic,
        ),
        results=results,
    )
    for r in [*once, *results]:
        result.layer_seconds[r.layer] = result.layer_seconds.get(r.layer, 0.0) + r.seconds
    collect_summary(project, result, client_config=client)
    result.seconds = time.monotonic() - started
    out("")
    for name in ads_tables(project):
        out(render_table(name, ads_rows(project, name)))
        out("")
    out(render_summary(project, result))
    return 1 if producer.error is not None else 0
