"""What a table is built from, and what a change of it needs (docs/decisions/0036).

`fingerprint(project, name)` gives a table's parts: its source, parse, reading, state,
transform, sink, checks, run settings, output columns and the identity of the tables it
reads as a stream. A run records them with the table's checkpoint; `classify` compares
the recorded parts with the current ones and says what the change needs:

- `restart`: the query picks it up when it starts again (a stateless query's filter or
  projection, a new column, an expectation, a trigger);
- `full_refresh`: the table must be rebuilt from its inputs: what its checkpoint or its
  Delta table keeps no longer fits (the state of its aggregate, dedupe or join; the
  source its position is in; the sink's mode, keys or partitioning; a column's type),
  or an input table it reads as a stream was rebuilt since.

No Spark; the only reads are of the project's files (a Python transform's module).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sqlglot import exp

from warehouse.spec.sqlcheck import parse_query
from warehouse.spec.table import DEFAULT_CLUSTER, Publish, TableDefinition, TopicSource

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject

FINGERPRINT_VERSION = 1

Status = Literal["new", "unrecorded", "unchanged", "restart", "full_refresh"]

FULL_REFRESH_PARTS: dict[str, str] = {
    "source": "the source its checkpoint's position is in",
    "state": "its stateful operators (watermark, dedupe, aggregate), whose state the checkpoint keeps",
    "sink": "its sink's mode, keys, order or partitioning, which the Delta table was written with",
}
"""Parts whose change always needs a full refresh, and why."""

RESTART_PARTS: dict[str, str] = {
    "parse": "how its records are parsed",
    "reading": "how much it reads per batch and where a new checkpoint starts",
    "checks": "its expectations",
    "run": "its trigger, snapshots, publish or tombstone retention",
}
"""Parts whose change a restart picks up."""


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _source_parts(defn: TableDefinition) -> dict[str, Any]:
    src = defn.spec.source
    if isinstance(src, TopicSource):
        k = src.kafka
        # The default cluster is left out, so that a table on it keeps its fingerprint.
        cluster = {} if k.cluster == DEFAULT_CLUSTER else {"cluster": k.cluster}
        if k.federated:
            cluster = {"clusters": k.cluster_list}
        return {
            "source": {"topics": sorted(k.topic_list), "pattern": k.pattern, **cluster},
            "parse": {"format": k.format, "schema": k.schema_, "connect": k.connect_schema},
            "reading": {
                "starting_offsets": k.starting_offsets,
                "max_offsets": k.max_offsets_per_trigger,
                "max_bytes": k.max_bytes_per_trigger,
                "on_data_loss": k.on_data_loss,
                "options": k.options,
            },
        }
    return {
        "source": {
            "table": src.table,
            "read": src.read,
            "join_streams": [j.model_dump(mode="json") for j in src.join_streams],
        },
        "parse": None,
        "reading": {"max_versions": src.max_versions_per_trigger},
    }


def _publish_part(publish: Publish | None) -> dict[str, Any] | None:
    if publish is None:
        return None
    # The default cluster is left out, so that a table on it keeps its fingerprint.
    default = publish.kafka.cluster == DEFAULT_CLUSTER
    return publish.model_dump(mode="json", exclude={"kafka": {"cluster"}} if default else None)


def _transform_part(project: LoadedProject, defn: TableDefinition) -> dict[str, Any] | None:
    """The transform as it runs: the SQL's text without its layout, or the Python
    reference with its module's source."""
    if defn.sql is not None:
        tree, _ = parse_query(defn.sql)
        return {
            "sql": tree.sql(dialect="spark") if tree is not None else " ".join(defn.sql.split())
        }
    ref = defn.python
    if ref is None:
        return None
    module = ref.split(":", 1)[0]
    source = project.path.joinpath(*module.split(".")).with_suffix(".py")
    code = _digest(source.read_text()) if source.is_file() else None
    return {"python": ref, "module": code}


def _sink_parts(defn: TableDefinition) -> tuple[dict[str, Any], Any]:
    """(the sink's full-refresh part, its restart part)."""
    sink = defn.spec.sink.model_dump(mode="json")
    retention = sink.pop("tombstone_retention", None)
    return sink, retention


def keeps_state(defn: TableDefinition) -> bool:
    """Whether the table's query keeps state: a dedupe, an aggregate, a join of streams,
    or SQL that aggregates (`aggregates_in_sql`)."""
    spec = defn.spec
    joins = not isinstance(spec.source, TopicSource) and bool(spec.source.join_streams)
    return bool(spec.dedupe or spec.aggregate or joins or aggregates_in_sql(defn))


def _state_part(defn: TableDefinition) -> dict[str, Any] | None:
    """The stateful operators; the watermark only where there is state for it to evict
    (on a stateless query it changes nothing a restart does not pick up)."""
    if not keeps_state(defn):
        return None
    spec = defn.spec
    return {
        "watermark": spec.watermark.model_dump(mode="json") if spec.watermark else None,
        "dedupe": spec.dedupe.model_dump(mode="json") if spec.dedupe else None,
        "aggregate": spec.aggregate.model_dump(mode="json") if spec.aggregate else None,
    }


def fingerprint(
    project: LoadedProject, name: str, *, upstream_ids: dict[str, str | None] | None = None
) -> dict[str, Any]:
    """The parts table `name` is built from, as JSON values: each part whole, except the
    transform (hashed) and the columns (`{name: type}`, None when not known before the
    query runs). `upstream_ids`: the Delta table id of each table it reads as a stream."""
    defn = project.tables[name]
    spec = defn.spec
    sink, retention = _sink_parts(defn)
    columns = project.schemas.get(name)
    parts: dict[str, Any] = {
        **_source_parts(defn),
        "state": _state_part(defn),
        "transform": _digest(_transform_part(project, defn)),
        "sink": sink,
        "checks": [e.model_dump(mode="json") for e in spec.expectations],
        "run": {
            "trigger": spec.trigger.model_dump(mode="json") if spec.trigger else None,
            "snapshots": spec.snapshots.model_dump(mode="json") if spec.snapshots else None,
            "publish": _publish_part(spec.publish),
            "tombstone_retention": retention,
        },
        "columns": None if columns is None or columns.opaque else {c.name: c.type for c in columns},
        "upstreams": dict(sorted((upstream_ids or {}).items())),
    }
    return {"version": FINGERPRINT_VERSION, "parts": parts}


def aggregates_in_sql(defn: TableDefinition) -> bool:
    """Whether the table's SQL keeps state in a stream: a GROUP BY, an aggregate function
    or a DISTINCT (a join of `source` with a snapshot keeps none)."""
    if defn.sql is None:
        return False
    tree, _ = parse_query(defn.sql)
    if tree is None:
        return False
    return any(tree.find_all(exp.Group, exp.AggFunc, exp.Distinct))


@dataclass(frozen=True)
class Classified:
    """What a table's change needs (`status`) and the changes that say so (`reasons`)."""

    status: Status
    reasons: list[str] = field(default_factory=list)


def _column_changes(was: dict[str, str] | None, now: dict[str, str] | None) -> Classified:
    if was is None or now is None or was == now:
        return Classified("unchanged")
    lower = {k.lower(): v for k, v in now.items()}
    retyped = [
        f"column `{c}` changed type from `{t}` to `{lower[c.lower()]}` (a Delta table keeps a "
        "column's type)"
        for c, t in was.items()
        if c.lower() in lower and lower[c.lower()] != t
    ]
    if retyped:
        return Classified("full_refresh", retyped)
    known = {c.lower() for c in was}
    added = [c for c in now if c.lower() not in known]
    gone = [c for c in was if c.lower() not in lower]
    said = [f"new column `{c}`" for c in added] + [f"column `{c}` no longer written" for c in gone]
    return Classified("restart", said)


def _upstream_changes(was: dict[str, Any], now: dict[str, Any]) -> list[str]:
    return [
        f"its input table `{t}` was rebuilt since it last read it (its position is in the old one)"
        for t in sorted(was)
        if t in now and now[t] != was[t]
    ]


def classify(
    recorded: dict[str, Any] | None,
    current: dict[str, Any],
    *,
    stateful: bool,
) -> Classified:
    """What the change from the `recorded` fingerprint to the `current` one needs.
    `stateful`: the query keeps state (its checkpoint holds some, or its new SQL
    aggregates), so that a change of its transform needs a full refresh too."""
    if recorded is None or recorded.get("version") != current.get("version"):
        return Classified("unrecorded")
    was, now = recorded["parts"], current["parts"]
    full = [
        f"{part} changed: {why}"
        for part, why in FULL_REFRESH_PARTS.items()
        if was.get(part) != now.get(part)
    ]
    restart = [
        f"{part} changed: {why}"
        for part, why in RESTART_PARTS.items()
        if was.get(part) != now.get(part)
    ]
    if was.get("transform") != now.get("transform"):
        if stateful:
            full.append("transform changed, and the query keeps state the new one may not fit")
        else:
            restart.append("transform changed (a stateless query)")
    columns = _column_changes(was.get("columns"), now.get("columns"))
    (full if columns.status == "full_refresh" else restart).extend(columns.reasons)
    full += _upstream_changes(was.get("upstreams") or {}, now.get("upstreams") or {})
    if full:
        return Classified("full_refresh", full)
    if restart:
        return Classified("restart", restart)
    return Classified("unchanged")


@dataclass(frozen=True)
class TableChange:
    """One table's entry of the change-aware plan: its `status`, the `reasons`, the
    tables whose full refresh it `follows`, and the tables that must `follow` its own."""

    table: str
    status: Status
    reasons: list[str] = field(default_factory=list)
    follows: list[str] = field(default_factory=list)
    followers: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reasons": list(self.reasons),
            "follows": list(self.follows),
            "followers": list(self.followers),
        }

    def line(self) -> str:
        """The plan's one-line verdict."""
        text = {
            "new": "new: never run; its first run builds it from its inputs",
            "unrecorded": "not recorded: its checkpoint holds no fingerprint; the next run "
            "records one",
            "unchanged": "unchanged",
            "restart": "changed, picked up by a restart",
            "full_refresh": "changed, needs a full refresh",
        }[self.status]
        if self.reasons:
            text += " (" + "; ".join(self.reasons) + ")"
        if self.followers:
            text += ", with " + ", ".join(f"`{f}`" for f in self.followers)
        return text


def propagate(
    project: LoadedProject, own: dict[str, Classified], *, existing: set[str]
) -> dict[str, TableChange]:
    """Each table's change, with full refreshes carried to the tables that read it as a
    stream (directly or not) and that have run (`existing`): their checkpoints hold
    positions in a table that is rebuilt. `own` is each table's own classification."""
    out: dict[str, TableChange] = {}
    graph = project.graph
    for name in graph.order:
        if name not in own:
            continue
        mine = own[name]
        follows = [
            up
            for up in graph.upstream(name, static=False)
            if up in out and out[up].status == "full_refresh"
        ]
        status, reasons = mine.status, list(mine.reasons)
        if follows and status != "new":
            status = "full_refresh"
            reasons += [f"follows the full refresh of `{up}`" for up in follows]
        out[name] = TableChange(name, status, reasons, follows)
    for name, change in out.items():
        if change.status == "full_refresh":
            followers = [r for r in graph.stream_readers(name) if r in existing]
            out[name] = TableChange(name, change.status, change.reasons, change.follows, followers)
    return out
