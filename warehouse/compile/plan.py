"""What each table compiles to, without Spark: `TablePlan` and the plan renderings.

`warehouse plan` prints these; the query builder and the runner read them, so
paths, modes and triggers are decided in one place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from warehouse.compile.errors import SelectionError
from warehouse.compile.fingerprint import TableChange
from warehouse.spec.paths import checkpoint_is_new
from warehouse.spec.table import (
    DEFAULT_CLUSTER,
    LAYERS,
    Scd2Sink,
    TableDefinition,
    TopicSource,
    UpsertSink,
    sink_keys,
)

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject

PlanFormat = Literal["text", "json", "mermaid", "dot"]


@dataclass(frozen=True)
class TablePlan:
    """One table's compiled query: where it reads, what it does, where it writes."""

    name: str
    layer: str
    file: str
    source_kind: Literal["kafka", "table"]
    source: str
    topics: list[str]
    upstreams: list[str]
    static_tables: list[str]
    transform: str | None
    operators: list[str]
    sink_mode: str
    keys: list[str]
    partition_by: list[str]
    output_mode: Literal["append", "update"]
    table_path: str
    checkpoint_path: str
    quarantine_path: str
    trigger: str
    publish: str | None
    expectations: list[str] = field(default_factory=list)
    snapshot_max_age: str | None = None
    """`snapshots: {max_age}`: how old a kept copy of `static_tables` may be; None: each
    batch reads their newest version."""
    catalog_name: str | None = None
    """`catalog.schema.table` in the session's catalog (`catalog:`); None: a path only."""
    quarantine_catalog_name: str | None = None
    cluster: str | None = None
    """The named Kafka cluster (`kafka.clusters`) the table reads; None: the default
    cluster, or no Kafka; a federation's first cluster."""
    clusters: list[str] | None = None
    """A federation's clusters (`source.kafka.clusters`), in its query's source order;
    None: it reads one cluster, or no Kafka."""
    publish_cluster: str | None = None
    """The named Kafka cluster `publish` writes to; None: the default cluster."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def output_mode(defn: TableDefinition) -> Literal["append", "update"]:
    """`update` for keyed sinks (aggregates re-emit changed groups, the sink upserts them).

    Update mode on a stateless query behaves like append, so it is safe for
    every keyed sink; append sinks with a windowed aggregate emit each window
    once, when the watermark passes its end.
    """
    return "update" if isinstance(defn.spec.sink, UpsertSink | Scd2Sink) else "append"


def source_text(defn: TableDefinition, *, checkpoint: str | Path | None = None) -> str:
    """How a table reads its source. A Kafka source starts from `starting_offsets`; given
    the table's `checkpoint`, it says when this run starts from the checkpoint's position
    instead (Spark reads `starting_offsets` only for a new checkpoint)."""
    src = defn.spec.source
    if isinstance(src, TopicSource):
        k = src.kafka
        where = f"pattern `{k.pattern}`" if k.pattern else ", ".join(f"`{t}`" for t in k.topic_list)
        fmt = k.format + (
            f" ({k.schema_})"
            if k.schema_
            else " (schema from the records)"
            if k.connect_schema
            else ""
        )
        start = k.starting_offsets if isinstance(k.starting_offsets, str) else "explicit offsets"
        if checkpoint is not None and not checkpoint_is_new(checkpoint):
            start = "its checkpoint"
        on = _on(k.cluster)
        if k.federated:
            on = f" on clusters {', '.join(f'`{c}`' for c in k.cluster_list)} (federated)"
        return f"kafka {where}{on} as {fmt} from {start}"
    text = f"table `{src.table}` ({src.read})"
    for j in src.join_streams:
        text += f" join stream `{j.table}`"
    return text


def _on(cluster: str | None) -> str:
    """` on cluster `eu``, or nothing for the default cluster."""
    return "" if cluster in (None, DEFAULT_CLUSTER) else f" on cluster `{cluster}`"


def _named(cluster: str | None) -> str | None:
    return None if cluster == DEFAULT_CLUSTER else cluster


def _topic_node(topic: str, cluster: str | None) -> str:
    """A topic's node in a drawn graph: by cluster and name."""
    return f"{cluster}/{topic}" if cluster else topic


def _topic_nodes(p: TablePlan) -> list[str]:
    """The nodes of the topics a table reads: each topic on each of its clusters."""
    clusters = [_named(c) for c in p.clusters] if p.clusters else [p.cluster]
    return [_topic_node(t, c) for t in p.topics for c in clusters]


def _transform_text(defn: TableDefinition) -> str | None:
    t = defn.spec.transform
    if t is None:
        return f"sql file {defn.sql_path}" if defn.sql is not None else None
    if t.python:
        return f"python {t.python}"
    return f"sql file {t.sql_file}" if t.sql_file else "sql"


def _operators(defn: TableDefinition) -> list[str]:
    spec = defn.spec
    ops: list[str] = []
    if spec.watermark:
        ops.append(f"watermark {spec.watermark.column} - {spec.watermark.delay}")
    if spec.dedupe:
        within = " within watermark" if spec.watermark else ""
        ops.append(f"dedupe [{', '.join(spec.dedupe.keys)}]{within}")
    if spec.aggregate:
        a = spec.aggregate
        parts = []
        if a.window:
            kind = "hopping" if a.window.slide else "tumbling"
            slide = f" every {a.window.slide}" if a.window.slide else ""
            parts.append(f"{kind} window {a.window.size}{slide} on {a.window.column}")
        if a.group_by:
            parts.append(f"by [{', '.join(a.group_by)}]")
        parts.append("measures " + ", ".join(f"{k}={v}" for k, v in a.measures.items()))
        ops.append("aggregate " + " ".join(parts))
    return ops


def plan_table(
    project: LoadedProject, name: str, *, static_tables: list[str] | None = None
) -> TablePlan:
    """The plan of one table of `project` (paths from the project, modes from the spec)."""
    defn = project.tables[name]
    spec = defn.spec
    sink = spec.sink
    src = spec.source
    if spec.trigger and spec.trigger.interval:
        trigger = f"every {spec.trigger.interval}"
    else:
        trigger = "continuous (batches back to back)"
    if static_tables is None:
        static_tables = [t for t in defn.static_tables if t in project.tables]
    return TablePlan(
        name=name,
        layer=defn.layer,
        file=str(defn.path),
        source_kind="kafka" if isinstance(src, TopicSource) else "table",
        source=source_text(defn),
        topics=list(src.topics),
        upstreams=list(src.upstream_tables),
        static_tables=static_tables,
        transform=_transform_text(defn),
        operators=_operators(defn),
        sink_mode=sink.mode,
        keys=sink_keys(sink),
        partition_by=list(sink.partition_by),
        output_mode=output_mode(defn),
        table_path=str(project.table_path(name)),
        checkpoint_path=str(project.checkpoint_path(name)),
        quarantine_path=str(project.quarantine_path(name)),
        trigger=trigger,
        publish=spec.publish.kafka.topic if spec.publish else None,
        expectations=[f"{e.type} ({e.on_violation})" for e in spec.expectations],
        snapshot_max_age=spec.snapshots.max_age if spec.snapshots else None,
        catalog_name=project.catalog_name(name),
        quarantine_catalog_name=project.quarantine_catalog_name(name),
        cluster=_named(defn.source_cluster),
        clusters=defn.source_clusters if len(defn.source_clusters) > 1 else None,
        publish_cluster=_named(spec.publish.kafka.cluster) if spec.publish else None,
    )


def ordered_names(project: LoadedProject) -> list[str]:
    """Every table in run order (`project.graph.order`: upstreams, including tables read
    as snapshots, before their readers; ties by layer, then name)."""
    return [n for n in project.graph.order if n in project.tables]


def select_tables(
    project: LoadedProject, *, layer: str | None = None, tables: list[str] | None = None
) -> list[str]:
    """Names to run for `--layer` / `--table`, in dependency order."""
    order = ordered_names(project)
    if tables:
        unknown = [t for t in tables if t not in project.tables]
        if unknown:
            raise SelectionError(
                "Unknown table "
                + ", ".join(f"`{t}`" for t in unknown)
                + "; the project has "
                + ", ".join(f"`{t}`" for t in order)
                + ". Check `--table` (see `warehouse plan`)."
            )
        order = [n for n in order if n in tables]
    if layer and layer != "all":
        if layer not in LAYERS:
            raise SelectionError(
                f"`{layer}` is not a layer; use one of {', '.join(LAYERS)} or `all`."
            )
        order = [n for n in order if project.tables[n].layer == layer]
    return order


def build_plan(
    project: LoadedProject, *, layer: str | None = None, tables: list[str] | None = None
) -> list[TablePlan]:
    return [plan_table(project, n) for n in select_tables(project, layer=layer, tables=tables)]


def render(
    plans: list[TablePlan], fmt: PlanFormat, *, changes: Mapping[str, TableChange] | None = None
) -> str:
    """The plans in `fmt`; `changes`: each table's change since its last run (text, json)."""
    changes = changes or {}
    if fmt == "json":
        tables = [
            {**p.to_dict(), **({"change": changes[p.name].to_dict()} if p.name in changes else {})}
            for p in plans
        ]
        return json.dumps({"tables": tables}, indent=2)
    if fmt == "mermaid":
        return render_mermaid(plans)
    if fmt == "dot":
        return render_dot(plans)
    return render_text(plans, changes=changes)


def render_changes(plans: list[TablePlan], changes: Mapping[str, TableChange]) -> list[str]:
    """The plan's closing lines: how many tables of each kind, and the command a full
    refresh needs."""
    picked = [changes[p.name] for p in plans if p.name in changes]
    if not picked:
        return []
    counts: dict[str, int] = {}
    for c in picked:
        counts[c.status] = counts.get(c.status, 0) + 1
    words = {"full_refresh": "full refresh", "restart": "restart"}
    lines = ["changes: " + ", ".join(f"{n} {words.get(s, s)}" for s, n in sorted(counts.items()))]
    roots = [c.table for c in picked if c.status == "full_refresh" and not c.follows]
    if roots:
        lines.append(
            f"a full refresh is needed: `warehouse run --full-refresh {','.join(roots)}` "
            "resets and rebuilds them and the tables that follow them"
        )
    return lines


def render_text(plans: list[TablePlan], *, changes: Mapping[str, TableChange] | None = None) -> str:
    changes = changes or {}
    lines: list[str] = []
    for i, p in enumerate(plans, 1):
        lines.append(f"{i}. {p.name}  [{p.layer}]  ({p.file})")
        lines.append(f"   source:      {p.source}")
        if p.static_tables:
            kept = (
                f"kept in Spark's cache, at most {p.snapshot_max_age} old"
                if p.snapshot_max_age
                else "the newest version at each batch"
            )
            lines.append(f"   snapshots:   {', '.join(p.static_tables)} ({kept})")
        if p.transform:
            lines.append(f"   transform:   {p.transform}")
        for op in p.operators:
            lines.append(f"   operator:    {op}")
        if p.expectations:
            lines.append(f"   checks:      {'; '.join(p.expectations)}")
        keys = f" keys [{', '.join(p.keys)}]" if p.keys else ""
        parts = f" partitioned by [{', '.join(p.partition_by)}]" if p.partition_by else ""
        lines.append(f"   sink:        {p.sink_mode}{keys}{parts} ({p.output_mode} output)")
        lines.append(f"   table:       {p.table_path}")
        if p.catalog_name:
            lines.append(
                f"   name:        {p.catalog_name} (quarantine: {p.quarantine_catalog_name})"
            )
        lines.append(f"   checkpoint:  {p.checkpoint_path}")
        lines.append(f"   quarantine:  {p.quarantine_path}")
        lines.append(f"   trigger:     {p.trigger} (availableNow with --once)")
        if p.publish:
            lines.append(
                f"   publish:     kafka topic `{p.publish}`{_on(p.publish_cluster)} (compacted)"
            )
        if p.name in changes:
            lines.append(f"   change:      {changes[p.name].line()}")
    if not plans:
        lines.append("no tables selected")
    lines += render_changes(plans, changes)
    return "\n".join(lines)


def _node_id(name: str) -> str:
    return "t_" + name


def render_mermaid(plans: list[TablePlan]) -> str:
    lines = ["flowchart LR"]
    names = {p.name for p in plans}
    for p in plans:
        lines.append(f'  {_node_id(p.name)}["{p.name}<br/>{p.layer} · {p.sink_mode}"]')
    for p in plans:
        for t in _topic_nodes(p):
            tid = "k_" + "".join(c if c.isalnum() else "_" for c in t)
            lines.append(f'  {tid}[("{t}")] --> {_node_id(p.name)}')
        for up in p.upstreams:
            if up not in names:
                lines.append(f'  {_node_id(up)}["{up}"]')
            lines.append(f"  {_node_id(up)} --> {_node_id(p.name)}")
        for st in p.static_tables:
            lines.append(f"  {_node_id(st)} -.-> {_node_id(p.name)}")
        if p.publish:
            out = _topic_node(p.publish, p.publish_cluster)
            pid = "k_" + "".join(c if c.isalnum() else "_" for c in out)
            lines.append(f'  {_node_id(p.name)} --> {pid}[("{out}")]')
    return "\n".join(lines)


def render_dot(plans: list[TablePlan]) -> str:
    lines = ["digraph warehouse {", "  rankdir=LR;", "  node [shape=box];"]
    for p in plans:
        lines.append(f'  "{p.name}" [label="{p.name}\\n{p.layer} · {p.sink_mode}"];')
    for p in plans:
        for t in _topic_nodes(p):
            lines.append(f'  "kafka:{t}" [shape=cylinder];')
            lines.append(f'  "kafka:{t}" -> "{p.name}";')
        for up in p.upstreams:
            lines.append(f'  "{up}" -> "{p.name}";')
        for st in p.static_tables:
            lines.append(f'  "{st}" -> "{p.name}" [style=dashed];')
        if p.publish:
            out = _topic_node(p.publish, p.publish_cluster)
            lines.append(f'  "kafka:{out}" [shape=cylinder];')
            lines.append(f'  "{p.name}" -> "kafka:{out}";')
    lines.append("}")
    return "\n".join(lines)
