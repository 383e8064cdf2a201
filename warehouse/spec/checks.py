"""Checks across a project's tables: names, graph, layers, columns, topics, expectations.

`check_project` takes the definitions the loader read and returns them in run
order with their graph and output columns, plus every problem found. Column
checks use the columns inferred table by table (`warehouse.spec.schemas`,
`warehouse.spec.sqlcheck`); where a table's columns cannot be known at load time
(a Python transform), the checks downstream of it are skipped rather than guessed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warehouse.spec.column_checks import ColumnChecker, did_you_mean, sql_location, ticks
from warehouse.spec.config import WarehouseConfig
from warehouse.spec.errors import Problem
from warehouse.spec.expectations import validate_all
from warehouse.spec.graph import TableGraph, build_graph
from warehouse.spec.pycode import ImportProblem, import_reference
from warehouse.spec.schemas import Columns, to_ddl
from warehouse.spec.sqlcheck import parse_query, read_tables
from warehouse.spec.table import (
    DEFAULT_CLUSTER,
    LAYERS,
    KafkaSource,
    Scd2Sink,
    TableDefinition,
    TableSource,
    TopicSource,
    UpsertSink,
)

logger = logging.getLogger(__name__)

_ARROW = " → ".join(LAYERS)


@dataclass
class CheckedProject:
    tables: dict[str, TableDefinition]
    graph: TableGraph
    schemas: dict[str, Columns]
    problems: list[Problem] = field(default_factory=list)


class _Checker:
    def __init__(
        self,
        project_dir: Path,
        payload: Mapping[str, Columns],
        broken: set[str],
        unloaded: set[str] | None = None,
    ) -> None:
        self.project_dir = project_dir
        self.payload = payload
        self.broken = broken
        self.unloaded = unloaded or set()
        self.problems: list[Problem] = []

    def add(self, d: TableDefinition, fld: str, message: str, *, path: str | None = None) -> None:
        self.problems.append(Problem(path or d.path, fld, message, table=d.name))

    # --- names, sources, imports ------------------------------------------------

    def unique_names(self, defs: list[TableDefinition]) -> dict[str, TableDefinition]:
        by_name: dict[str, list[TableDefinition]] = {}
        for d in defs:
            by_name.setdefault(d.name, []).append(d)
        for name, group in by_name.items():
            reserved = _reserved(name)
            if reserved:
                for g in group:
                    self.add(g, "table", f"table name `{name}` is reserved: {reserved}. Rename it.")
            if len(group) > 1:
                files = ticks(g.path for g in group)
                for g in group:
                    self.add(
                        g,
                        "table",
                        f"table `{name}` is declared more than once ({files}). Rename one of them.",
                    )
        return {name: group[0] for name, group in by_name.items()}

    def source(self, d: TableDefinition, defs: Mapping[str, TableDefinition]) -> None:
        src = d.spec.source
        if isinstance(src, TopicSource):
            self._kafka(d, src.kafka)
            return
        refs = [("source.table", src.table)] + [
            (f"source.join_streams[{i}].table", j.table) for i, j in enumerate(src.join_streams)
        ]
        for fld, name in refs:
            if name in self.unloaded:
                continue  # declared, with problems of its own
            if name not in defs:
                self.add(
                    d,
                    fld,
                    f"Table `{d.name}` reads `{name}`, which is not a table of the "
                    f"project.{did_you_mean(str(name), defs)} Tables: {ticks(sorted(defs))}.",
                )
            else:
                self.layer_order(d, defs[name], fld)

    def _kafka(self, d: TableDefinition, k: KafkaSource) -> None:
        if k.schema_ and k.schema_ not in self.payload and k.schema_ not in self.broken:
            self.add(
                d,
                "source.kafka.schema",
                f"schema `{k.schema_}` not found: expected "
                f"`schemas/{k.schema_}.json` or `schemas/{k.schema_}.ddl` (schemas: "
                f"{ticks(sorted(self.payload))}).{did_you_mean(k.schema_, self.payload)}",
            )
        self._row_schema(d, k)
        for op in ("watermark", "dedupe", "aggregate"):
            if getattr(d.spec, op) is not None:
                self.add(
                    d,
                    op,
                    f"Table `{d.name}` reads Kafka directly, so it cannot use the "
                    f"stateful `{op}`: a Kafka-sourced query must divert malformed records "
                    "to quarantine in the same batch. Land the raw events in an ODS table "
                    f"and do the `{op}` in a DWD table that reads it.",
                )

    def _row_schema(self, d: TableDefinition, k: KafkaSource) -> None:
        """A CDC format knows its columns from `schema`, or from the records themselves
        (`connect_schema`, `debezium-json` and `upsert-json`); one of the two, and only
        where it applies."""
        if k.connect_schema:
            if k.format not in ("debezium-json", "upsert-json"):
                self.add(
                    d,
                    "source.kafka.connect_schema",
                    f"Table `{d.name}`: `connect_schema` reads the columns from the Kafka "
                    "Connect schema of change records and applies to formats "
                    f"`debezium-json` and `upsert-json`, not `{k.format}`. Remove it and "
                    "give `schema: NAME`.",
                )
            elif k.schema_:
                self.add(
                    d,
                    "source.kafka.connect_schema",
                    f"Table `{d.name}`: give either `schema: {k.schema_}` or "
                    "`connect_schema: true` (the columns from the records), not both.",
                )
            elif k.pattern:
                self.add(
                    d,
                    "source.kafka.connect_schema",
                    f"Table `{d.name}`: `connect_schema` reads the columns from the newest "
                    "records of named topics; use `topic` or `topics` instead of `pattern`, "
                    "or give `schema: NAME`.",
                )
            return
        if k.format in ("debezium-json", "upsert-json") and not k.schema_:
            connect = (
                " or, when the records carry their Kafka Connect schema "
                '(`{"schema": ..., "payload": ...}`: JsonConverter with `schemas.enable=true`), '
                "`connect_schema: true`"
            )
            self.add(
                d,
                "source.kafka.schema",
                f"Table `{d.name}`: format `{k.format}` needs the columns of the row: add "
                "`schema: NAME` (a file `schemas/NAME.json` or `schemas/NAME.ddl` describing "
                f"the row image){connect}.{_schemas_known(self.payload)}",
            )

    def layer_order(
        self, d: TableDefinition, up: TableDefinition, fld: str, path: str | None = None
    ) -> None:
        if up.layer_index > d.layer_index:
            self.add(
                d,
                fld,
                f"Table `{d.name}` (layer `{d.layer}`) reads `{up.name}` from the "
                f"later layer `{up.layer}`; a table reads only Kafka, its own layer or "
                f"earlier ones ({_ARROW}). Move `{d.name}` to layer `{up.layer}` or later, "
                f"or `{up.name}` earlier.",
                path=path,
            )

    def python(self, d: TableDefinition) -> None:
        ref = d.python
        if not ref:
            return
        try:
            import_reference(self.project_dir, ref)
        except ImportProblem as e:
            self.add(
                d,
                "transform.python",
                f"Table `{d.name}` (layer `{d.layer}`): the Python "
                f"transform `{ref}` does not load: {e}. Fix the reference "
                "(`package.module:function`, relative to the project folder).",
            )

    def expectations(self, d: TableDefinition) -> None:
        # `validate_all`, not `validate` one by one: two expectations with one name would
        # otherwise load and only fail when the first micro-batch compiles the checks.
        exps = d.spec.expectations
        for i, message in validate_all(exps):
            self.add(d, f"expectations[{i}].{exps[i].type}", message)

    def clusters(self, d: TableDefinition, known: list[str], conf: str) -> None:
        """Every `cluster` the table names is `default` or a name of `kafka.clusters`."""
        named = []
        src = d.spec.source
        if isinstance(src, TopicSource) and src.kafka.federated:
            named.extend(("source.kafka.clusters", c) for c in src.kafka.cluster_list)
        elif isinstance(src, TopicSource):
            named.append(("source.kafka.cluster", src.kafka.cluster))
        if d.spec.publish is not None:
            named.append(("publish.kafka.cluster", d.spec.publish.kafka.cluster))
        if d.spec.quarantine is not None and d.spec.quarantine.kafka.cluster is not None:
            named.append(("quarantine.kafka.cluster", d.spec.quarantine.kafka.cluster))
        for fld, cluster in named:
            if cluster not in known:
                self.add(
                    d,
                    fld,
                    f"Table `{d.name}` names the Kafka cluster `{cluster}`, which "
                    f"{conf} does not declare (clusters: {ticks(known)}). Add it "
                    f"under `kafka.clusters` or name a declared one.{did_you_mean(cluster, known)}",
                )

    def federation(self, d: TableDefinition) -> None:
        """A table reading several clusters (`source.kafka.clusters`) orders its rows by
        nothing Kafka gives across clusters, and its quarantined records cannot name one
        source cluster to be read back from."""
        src = d.spec.source
        if not isinstance(src, TopicSource) or not src.kafka.federated:
            return
        sink = d.spec.sink
        seq = sink.sequence_by if isinstance(sink, UpsertSink | Scd2Sink) else None
        if seq in ("_offset", "_partition"):
            self.add(
                d,
                "sink.sequence_by",
                f"Table `{d.name}` reads the clusters {ticks(src.kafka.cluster_list)}: "
                f"`{seq}` of one cluster says nothing about the order of another's records, "
                "so it cannot say which change of a key is the latest. Sequence by a column "
                "of the records (an event time, a version), or read one cluster.",
            )
        if d.spec.quarantine is not None:
            self.add(
                d,
                "quarantine.kafka",
                f"Table `{d.name}` reads the clusters {ticks(src.kafka.cluster_list)}: a "
                "dead-letter topic sends each quarantined record with its original key and "
                "value, read back from the one cluster the table reads, which a federation "
                "does not have. Quarantined rows stay in the table's quarantine table "
                "(with `_cluster`); remove `quarantine`, or read one cluster.",
            )

    def publish_topics(self, defs: Mapping[str, TableDefinition]) -> None:
        by_topic: dict[tuple[str, str], list[TableDefinition]] = {}
        for d in defs.values():
            if d.spec.publish is not None:
                k = d.spec.publish.kafka
                by_topic.setdefault((k.cluster, k.topic), []).append(d)
        for (cluster, topic), group in by_topic.items():
            if len(group) > 1:
                for d in group:
                    others = ticks(f"{o.name}` in `{o.path}" for o in group if o is not d)
                    self.add(
                        d,
                        "publish.kafka.topic",
                        f"topic `{topic}`{_on(cluster)} is also published by "
                        f"{others}; each topic has one publishing table. Rename one topic.",
                    )

    def dead_letters(self, defs: Mapping[str, TableDefinition]) -> None:
        """`quarantine.kafka`: a Kafka-sourced table's records, to a topic of its own."""
        published = {
            (d.spec.publish.kafka.cluster, d.spec.publish.kafka.topic)
            for d in defs.values()
            if d.spec.publish
        }
        by_topic: dict[tuple[str, str], list[TableDefinition]] = {}
        for d in defs.values():
            if d.spec.quarantine is None:
                continue
            topic = d.spec.quarantine.kafka.topic
            src = d.spec.source
            if not isinstance(src, TopicSource):
                self.add(
                    d,
                    "quarantine.kafka",
                    f"Table `{d.name}` reads the table `{src.table}`, not Kafka: a dead-letter "
                    "topic takes quarantined Kafka records with their original key and value. "
                    "Set `quarantine` on the table that reads the topic, or remove it.",
                )
                continue
            cluster = d.dead_letter_cluster or src.kafka.cluster
            reads = cluster == src.kafka.cluster and topic in src.topics
            if reads or (cluster, topic) in published:
                what = "reads" if reads else "publishes a table to"
                self.add(
                    d,
                    "quarantine.kafka.topic",
                    f"dead-letter topic `{topic}`{_on(cluster)} is a topic the project "
                    f"{what}; give the dead letters a topic of their own (e.g. `dlq.{d.name}`).",
                )
                continue
            by_topic.setdefault((cluster, topic), []).append(d)
        for (cluster, topic), group in by_topic.items():
            for d in group if len(group) > 1 else ():
                others = ticks(f"{o.name}` in `{o.path}" for o in group if o is not d)
                self.add(
                    d,
                    "quarantine.kafka.topic",
                    f"dead-letter topic `{topic}`{_on(cluster)} is also the dead-letter topic "
                    f"of {others}; each table has its own. Rename one topic.",
                )

    # --- SQL references (for the graph) ------------------------------------------

    def static_tables(self, d: TableDefinition, defs: Mapping[str, TableDefinition]) -> list[str]:
        if d.sql is None:
            return []
        tree, _ = parse_query(d.sql)
        if tree is None:
            return []  # reported with the column checks
        streamed = set(d.spec.source.upstream_tables) | {"source"}
        return [t for t in read_tables(tree) if t in defs and t not in streamed]

    def reads_unloaded(self, d: TableDefinition) -> bool:
        """Whether the table's SQL names a table declared with problems of its own."""
        if d.sql is None or not self.unloaded:
            return False
        tree, _ = parse_query(d.sql)
        return tree is not None and bool(set(read_tables(tree)) & self.unloaded)


def _on(cluster: str) -> str:
    """` on cluster `eu``, or nothing for the default cluster."""
    return "" if cluster == DEFAULT_CLUSTER else f" on cluster `{cluster}`"


def _schemas_known(payload: Mapping[str, Columns]) -> str:
    return f" Schemas of the project: {ticks(sorted(payload))}." if payload else ""


def _reserved(name: str) -> str | None:
    if name == "source":
        return "`source` names a table's input in its SQL"
    if name.endswith("__quarantine"):
        return "`<table>__quarantine` holds a table's quarantined rows"
    if name == "_quality_events":
        return "`_quality_events` holds the expectation counts"
    return None


def mirror_problems(config: WarehouseConfig, conf: str) -> list[tuple[str, str]]:
    """(field, message) for each cluster of `mirror:` that `kafka:` contradicts or leaves
    unknown: an alias of `mirror.clusters` that is also one of the project's Kafka
    clusters, a flow naming a cluster neither declares. `conf`: the settings' file."""
    kafka, mirror = config.kafka, config.mirror
    out = []
    for alias in mirror.clusters:
        other = kafka.declared_at(alias)
        if other is not None:
            out.append(
                (
                    f"mirror.clusters.{alias}",
                    f"cluster `{alias}` is declared twice: here and as the project's Kafka "
                    f"cluster `{other}` in {conf}. A flow naming `{alias}` takes that "
                    f"cluster's bootstrap, security and client as they are: remove "
                    f"`mirror.clusters.{alias}`, or give it another alias.",
                )
            )
    known = list(dict.fromkeys([*mirror.clusters, *kafka.cluster_names]))
    for source, target, _ in mirror.pairs():
        for cluster in (source, target):
            if config.mirror_cluster_at(cluster) is None:
                out.append(
                    (
                        "mirror.flows",
                        f"flow `{source} -> {target}` names the cluster `{cluster}`, which "
                        f"{conf} does not declare (clusters: {ticks(known)}). Add it under "
                        "`mirror.clusters` (MirrorMaker only) or `kafka.clusters`, or name a "
                        f"declared one.{did_you_mean(cluster, known)}",
                    )
                )
    return out


def check_project(
    project_dir: Path,
    definitions: list[TableDefinition],
    payload: Mapping[str, Columns],
    broken: set[str] | None = None,
    *,
    unloaded: set[str] | None = None,
    clusters: list[str] | None = None,
    conf: str = "conf/<env>.yml",
) -> CheckedProject:
    """Check `definitions` together; return them in run order with graph, columns, problems.

    `broken`: schemas present but invalid; `unloaded`: tables declared but not loaded
    (their problems are reported already), which the tables reading them do not repeat;
    `clusters`: the Kafka clusters of the environment (`default` first), None when its
    config did not load (the tables' clusters are then not checked); `conf`: its file."""
    checker = _Checker(project_dir, payload, broken or set(), unloaded)
    defs = checker.unique_names(definitions)
    # An unloaded table's columns are unknown, as a Python transform's are.
    columns = ColumnChecker(checker.add, payload, [*defs, *sorted(checker.unloaded)])
    enriched: dict[str, TableDefinition] = {}
    for name, d in defs.items():
        checker.source(d, defs)
        checker.python(d)
        checker.expectations(d)
        checker.federation(d)
        if clusters is not None:
            checker.clusters(d, clusters, conf)
        static = checker.static_tables(d, defs)
        for t in static:
            checker.layer_order(d, defs[t], *sql_location(d))
        if d.spec.snapshots is not None and not static and not checker.reads_unloaded(d):
            checker.add(
                d,
                "snapshots.max_age",
                f"Table `{d.name}` keeps snapshots for at most "
                f"`{d.spec.snapshots.max_age}`, but its SQL reads no other table of the "
                "project as a snapshot (only `source` and the join streams). "
                "Remove `snapshots`.",
            )
        update: dict[str, Any] = {"static_tables": static}
        src = d.spec.source
        if isinstance(src, TopicSource) and src.kafka.schema_ in payload:
            # NOT NULL marks the fields a record must have (JSON Schema `required`):
            # the parse quarantines a record without one.
            update["payload_ddl"] = to_ddl(payload[src.kafka.schema_], not_null=True)
        enriched[name] = d.model_copy(update=update)
    checker.publish_topics(enriched)
    checker.dead_letters(enriched)
    graph = build_graph(enriched)
    for cycle in graph.cycles:
        first = enriched[cycle[0]]
        chain = " → ".join(f"`{n}` ({enriched[n].path})" for n in cycle[:-1]) + f" → `{cycle[0]}`"
        reads = cycle[-2]  # the table `first` reads to close the cycle
        kinds = {e.kind for e in graph.edges if e.upstream == reads and e.downstream == first.name}
        fld, path = "source.table", None
        source = first.spec.source
        if "source" not in kinds and "join" in kinds and isinstance(source, TableSource):
            i = [j.table for j in source.join_streams].index(reads)
            fld = f"source.join_streams[{i}].table"
        elif "source" not in kinds:
            fld, path = sql_location(first)
        checker.add(
            first,
            fld,
            f"tables form a cycle: {chain}. A table cannot read, directly or through "
            "others, from itself; remove one of these reads.",
            path=path,
        )
    schemas: dict[str, Columns] = {}
    for name in graph.order:
        schemas[name] = columns.columns(enriched[name], schemas)
    ordered = {name: enriched[name] for name in graph.order}
    return CheckedProject(ordered, graph, schemas, checker.problems)
