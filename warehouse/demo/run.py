"""`warehouse demo`: the bundled example end to end, once.

Steps: (re)start from a clean slate (the example's tables, checkpoints and, on the
embedded broker, its topics), produce the generated events, run every layer once
in dependency order, run the checks, then print the ADS tables and a summary.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import streams.storage as storage
from warehouse.errors import WarehouseError
from warehouse.generate import TOPICS, ProduceStats, ensure_topics, generate, produce_records
from warehouse.spec.paths import events_path, reports_dir, table_exists
from warehouse.spec.table import LAYERS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from warehouse.project import Project
    from warehouse.runtime.results import RunResult

logger = logging.getLogger(__name__)

Out = Callable[[str], None]

ADS_ORDER: dict[str, tuple[str, bool]] = {
    "ads_city_leaderboard": ("gmv", True),
    "ads_conversion": ("orders", True),
}
"""How the demo sorts each ADS table it prints: (column, descending)."""


@dataclass
class DemoResult:
    """What one demo run did; `exit_code` is 0 when the checks passed."""

    bootstrap: str
    produced: ProduceStats
    results: list[RunResult]
    layer_seconds: dict[str, float] = field(default_factory=dict)
    """Per layer, the sum of its tables' own seconds (tables of a run overlap)."""
    run_seconds: float = 0.0
    """The run of every table, from the first start to the last end."""
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: dict[str, int] = field(default_factory=dict)
    published: dict[str, int] = field(default_factory=dict)
    checks_exit: int | None = None
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return int(self.checks_exit or 0)


class DemoProjectError(WarehouseError):
    """The project reads topics the example's generator does not produce."""

    exit_code = 2


def check_demo_project(project: Project) -> None:
    """Refuse a project that reads a topic the generator does not produce: the demo
    produces the bundled example's events only, and such a table would read nothing."""
    for name, defn in project.tables.items():
        foreign = [t for t in defn.spec.source.topics if t not in TOPICS]
        if foreign:
            raise DemoProjectError(
                f"`warehouse demo` runs the bundled example: it produces "
                f"{', '.join(f'`{t}`' for t in TOPICS)}, and table `{name}` ({defn.path}) "
                f"reads `{foreign[0]}`. Run it from the repository's root (the example "
                "project), or feed this project's topics with `warehouse produce` and run "
                "it with `warehouse run` (its README shows how).",
                table=name,
            )


def source_topics(project: Project) -> list[str]:
    """Every topic the project reads or publishes."""
    topics: list[str] = []
    for defn in project.tables.values():
        topics += defn.spec.source.topics
        if defn.spec.publish is not None:
            topics.append(defn.spec.publish.kafka.topic)
    return sorted(set(topics))


def reset_state(project: Project, *, bootstrap: str | None, out: Out) -> None:
    """Remove the example's tables and checkpoints, and (given `bootstrap`) its topics."""
    from warehouse.runtime.locks import holding
    from warehouse.runtime.recover import reset

    removed = 0
    # Every table at once: a table another process runs refuses the reset before any is removed.
    with holding(project, project.tables, doing="reset"):
        for name in project.tables:
            removed += len(reset(project, name))
    if storage.remove(events_path(project.root)):
        removed += 1
    if removed:
        out(f"removed the previous demo's tables and checkpoints under {project.root}")
    if bootstrap is not None:
        deleted = delete_topics(project, bootstrap)
        if deleted:
            out(f"deleted the previous demo's topics: {', '.join(deleted)}")


def delete_topics(project: Project, bootstrap: str) -> list[str]:
    """Delete the example's topics that exist; returns their names."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, **project.config.kafka.client_config()})
    existing = set(admin.list_topics(timeout=30).topics)
    doomed = [t for t in source_topics(project) if t in existing]
    if not doomed:
        return []
    for topic, fut in admin.delete_topics(doomed, operation_timeout=30).items():
        fut.result(timeout=60)
        logger.info("deleted topic %s", topic)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and set(doomed) & set(admin.list_topics(timeout=30).topics):
        time.sleep(0.2)
    return doomed


def run_demo(
    project: Project,
    spark: SparkSession,
    *,
    bootstrap: str,
    events: int = 3000,
    seed: int = 7,
    fresh: bool = True,
    delete_old_topics: bool = True,
    checks: bool = True,
    out: Out = print,
) -> DemoResult:
    """Produce `events` generated events and run every layer once; prints as it goes."""

    started = time.monotonic()
    if fresh:
        reset_state(project, bootstrap=bootstrap if delete_old_topics else None, out=out)
    client = project.config.kafka.client_config()
    ensure_topics(bootstrap, client_config=client)
    records = generate(events, seed=seed)
    out(f"producing {len(records)} records ({events} events, seed {seed}) to {bootstrap} ...")
    produced = produce_records(bootstrap, records, client_config=client)
    out(f"  {produced.line()}")

    t0 = time.monotonic()
    names = list(project.tables)

    def progress(line: str) -> None:
        table = line.split(" ", 1)[0]
        step = f"[{names.index(table) + 1}/{len(names)}] " if table in names else ""
        out(f"  {time.monotonic() - t0:6.1f}s  {step}{line}")

    out(f"running {len(names)} tables once, each after the tables it reads ...")
    results = run_once(project, spark, bootstrap=bootstrap, progress=progress)
    result = DemoResult(bootstrap=bootstrap, produced=produced, results=results)
    result.run_seconds = time.monotonic() - t0
    for r in results:
        result.layer_seconds[r.layer] = result.layer_seconds.get(r.layer, 0.0) + r.seconds
    if checks:
        from warehouse.quality.check import run_checks

        out("running the checks ...")
        report = run_checks(project, report_dir=storage.join(reports_dir(project.root), "demo"))
        result.checks_exit = int(report.exit_code)
        out(report.summary_text())
    collect_summary(project, result, client_config=client)
    for name in ads_tables(project):
        out("")
        out(render_table(name, ads_rows(project, name)))
    out("")
    result.seconds = time.monotonic() - started
    out(render_summary(project, result))
    return result


def run_once(
    project: Project,
    spark: SparkSession,
    *,
    bootstrap: str,
    progress: Out,
    tables: list[str] | None = None,
    attempts: int = 8,
) -> list[RunResult]:
    """Run every table (or `tables`) once, in dependency order; a query whose Python worker
    missed Spark's connect window is started again after a pause (the runtime's
    `RetryPolicy`; its checkpoint resumes where it stopped)."""
    from warehouse.runtime.failures import RetryPolicy

    pipeline = project.pipeline(
        spark,
        "all",
        tables,
        progress=progress,
        bootstrap=bootstrap,
        retry=RetryPolicy(attempts=attempts, pause=10.0),
    )
    return pipeline.run(once=True)


def ads_tables(project: Project) -> list[str]:
    return [n for n, d in project.tables.items() if d.layer == "ads"]


def ads_rows(project: Project, name: str) -> list[dict[str, Any]]:
    """An ADS table's rows, sorted as the demo shows them (without internal columns)."""
    from streams.delta import read_table

    path = project.table_path(name)
    if not table_exists(path):
        return []
    rows = read_table(path).to_pylist()
    column, desc = ADS_ORDER.get(name, (None, False))
    if column is not None:
        rows.sort(key=lambda r: (r.get(column) is None, r.get(column) or 0), reverse=desc)
    return rows


def collect_summary(
    project: Project, result: DemoResult, *, client_config: dict[str, str] | None = None
) -> None:
    """Rows and quarantined rows per table; keys on each published topic."""
    from streams.cdc import latest_values
    from streams.delta import table_info

    for name in project.tables:
        for path, into in (
            (project.table_path(name), result.rows),
            (project.quarantine_path(name), result.quarantined),
        ):
            if table_exists(path):
                into[name] = int(table_info(path).get("rows") or 0)
    for defn in project.tables.values():
        if defn.spec.publish is not None:
            topic = defn.spec.publish.kafka.topic
            values = latest_values(result.bootstrap, topic, client_config=client_config)
            result.published[topic] = len(values)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ", timespec="seconds")
    return "" if value is None else str(value)


def render_table(title: str, rows: list[dict[str, Any]], *, limit: int = 20) -> str:
    """A plain text table: a title line, a header, right-aligned numbers."""
    if not rows:
        return f"{title}: (no rows)"
    columns = [c for c in rows[0] if not c.startswith("_")]
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows[:limit]]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    numeric = [
        all(
            isinstance(r.get(c), int | float) or hasattr(r.get(c), "as_tuple") for r in rows[:limit]
        )
        for c in columns
    ]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    more = f" (first {limit} of {len(rows)})" if len(rows) > limit else f" ({len(rows)} rows)"
    out = [f"{title}{more}", line(columns), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    return "\n".join(out)


def render_summary(project: Project, result: DemoResult) -> str:
    """Rows per table, quarantined rows, time per layer, published topics."""
    lines = ["summary", f"  events produced: {result.produced.records} records"]
    width = max(len(n) for n in project.tables)
    lines.append(f"  {'table'.ljust(width)}  layer      rows  quarantined")
    for name, defn in project.tables.items():
        lines.append(
            f"  {name.ljust(width)}  {defn.layer:<5} {result.rows.get(name, 0):>8}  "
            f"{result.quarantined.get(name, 0):>11}"
        )
    skipped = [r for r in result.results if r.skipped]
    for r in skipped:
        lines.append(f"  skipped: {r.table} ({r.skipped})")
    per_layer = ", ".join(
        f"{layer} {result.layer_seconds[layer]:.1f}s"
        for layer in LAYERS
        if layer in result.layer_seconds
    )
    lines.append(
        f"  time per layer: {per_layer} (its tables' own seconds; tables that do not read"
        f" each other run side by side: {result.run_seconds:.1f}s in all)"
    )
    for topic, keys in sorted(result.published.items()):
        lines.append(f"  published: {topic} holds {keys} keys (compacted changelog)")
    if result.checks_exit is not None:
        lines.append(f"  checks: {'passed' if result.checks_exit == 0 else 'FAILED'}")
    lines.append(f"  total: {result.seconds:.1f}s")
    return "\n".join(lines)
