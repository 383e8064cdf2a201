"""Column checks of one table at load: the columns each step needs exist, and the
columns the table outputs (inferred without Spark, so its readers can be checked).

Where a table's columns cannot be known at load time (a Python transform), they are
opaque and the checks that need them are skipped rather than guessed.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping

from warehouse.spec.expectations import EXPECTATION_TYPES
from warehouse.spec.schemas import (
    CHANGE_COLUMNS,
    WINDOW_COLUMNS,
    Column,
    Columns,
    kafka_columns,
    sink_columns,
    table_source_columns,
)
from warehouse.spec.sqlcheck import analyze_sql, expression_type
from warehouse.spec.table import (
    Scd2Sink,
    TableDefinition,
    TableSource,
    TopicSource,
    UpsertSink,
    sink_keys,
)

Report = Callable[..., None]
"""`report(definition, field, message, path=None)`: record one problem."""


def ticks(names: Iterable[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) or "none"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" Did you mean `{close[0]}`?" if close else ""


def sql_location(d: TableDefinition) -> tuple[str, str]:
    """(field, path) naming where a table's SQL is written, for problems found in it."""
    return ("", d.sql_path) if d.sql_path else ("transform.sql", d.path)


class ColumnChecker:
    """Infers each table's output columns in run order and reports missing ones."""

    def __init__(self, add: Report, payload: Mapping[str, Columns], all_names: list[str]) -> None:
        self.add = add
        self.payload = payload
        self.all_names = all_names

    def columns(self, d: TableDefinition, known: Mapping[str, Columns]) -> Columns:
        spec = d.spec
        unknown = Columns(opaque=True)
        cols = self._source_columns(d, known)
        out = cols
        if d.sql is not None:
            out = self._sql(d, cols, known)
        elif d.python:
            out = unknown
        if spec.watermark is not None:
            self._need(
                d, "watermark.column", spec.watermark.column, [cols, out], "watermark column"
            )
        if spec.dedupe is not None:
            for i, key in enumerate(spec.dedupe.keys):
                self._need(d, f"dedupe.keys[{i}]", key, [out], "dedupe key", fix="dedupe.keys")
        if spec.aggregate is not None:
            out = self._aggregate(d, out)
        self._sink_columns(d, out)
        self._upsert_order(d, out)
        self._expectation_columns(d, out)
        self._duplicates(d, out)
        self._change_feed_names(d, out)
        return sink_columns(out, spec.sink.mode)

    def _source_columns(self, d: TableDefinition, known: Mapping[str, Columns]) -> Columns:
        """The columns the table's source gives; a join stream's watermark column checked."""
        src = d.spec.source
        unknown = Columns(opaque=True)
        if isinstance(src, TopicSource):
            payload = self.payload.get(src.kafka.schema_) if src.kafka.schema_ else None
            return kafka_columns(src.kafka.format, payload, federated=src.kafka.federated)
        for i, join in enumerate(src.join_streams):
            if join.watermark is not None:
                self._need(
                    d,
                    f"source.join_streams[{i}].watermark.column",
                    join.watermark.column,
                    [known.get(join.table, unknown)],
                    "join watermark column",
                    where=f"`{join.table}`",
                )
        return table_source_columns(known.get(src.table, unknown), src.read)

    def _sink_columns(self, d: TableDefinition, out: Columns) -> None:
        """The sink's keys, `sequence_by` and partition columns are output columns."""
        sink = d.spec.sink
        for i, key in enumerate(sink_keys(sink)):
            self._need(d, f"sink.keys[{i}]", key, [out], "sink key", fix="sink.keys")
        if isinstance(sink, UpsertSink | Scd2Sink) and sink.sequence_by:
            self._need(
                d,
                "sink.sequence_by",
                sink.sequence_by,
                [out],
                "`sequence_by` column",
                fix="sink.sequence_by",
            )
        for i, col in enumerate(sink.partition_by):
            self._need(
                d,
                f"sink.partition_by[{i}]",
                col,
                [out],
                "partition column",
                fix="sink.partition_by",
            )

    def _upsert_order(self, d: TableDefinition, out: Columns) -> None:
        """An upsert without `sequence_by` keeps, of a key's changes in a batch, the one with
        the greatest `_offset`, and offsets order records only within one partition of one
        topic. That is the order of a key's changes only for records of one topic keyed by
        the sink keys, `upsert-json` or `raw` by `key` (docs/cdc.md, "SCD type 1"); any
        other table whose
        rows carry `_offset` (read from Kafka, or from a table that did) needs
        `sequence_by`, unless a dedupe on (some of) the sink keys leaves one row per key."""
        sink, src, dedupe = d.spec.sink, d.spec.source, d.spec.dedupe
        if not isinstance(sink, UpsertSink) or sink.sequence_by:
            return
        if dedupe is not None and set(dedupe.keys) <= set(sink.keys):
            return
        if not out.opaque and not all(out.has(k) for k in sink.keys):
            return  # a sink key that is not a column is the problem to fix first
        keys = ticks(sink.keys)
        if isinstance(src, TopicSource):
            k = src.kafka
            keyed = k.format == "upsert-json" or (k.format == "raw" and sink.keys == ["key"])
            if keyed and k.topic:
                return
            why = (
                "it reads several topics, whose offsets order nothing between them"
                if keyed
                else f"its `{k.format}` records need not be keyed by the sink keys ({keys})"
            )
            hint = (
                " (`_source_lsn` for Postgres, each change's position in the write-ahead "
                "log; `_source_ts_ms`, the source database's commit time, which every Debezium "
                "change carries, where no two changes of a key share one)"
                if k.format == "debezium-json"
                else ""
            )
        elif out.has("_offset"):
            why = f"its rows carry `_offset` from `{src.table}`, which read Kafka"
            hint = ""
        else:
            return
        self.add(
            d,
            "sink.sequence_by",
            f"Table `{d.name}`: an `upsert` sink without `sequence_by` keeps, of a key's "
            "changes in a batch, the one with the greatest Kafka `_offset`, and offsets order "
            f"records only within one partition of one topic: {why}, so a key's changes can "
            "land in different partitions and an older one win. Set `sink.sequence_by` to "
            f"the column that orders a key's changes{hint}; `_offset` itself only when every "
            "change of a key is in one partition. A table of one topic whose records are "
            "keyed by the sink keys (`upsert-json`, or `raw` by `key`) needs none.",
        )

    def _sql(self, d: TableDefinition, cols: Columns, known: Mapping[str, Columns]) -> Columns:
        assert d.sql is not None
        mapping: dict[str, Columns] = {n: c for n, c in known.items()}
        for n in self.all_names:
            mapping.setdefault(n, Columns(opaque=True))
        mapping.pop(d.name, None)
        mapping["source"] = cols
        analysis = analyze_sql(d.sql, mapping)
        fld, path = sql_location(d)
        for message in analysis.problems:
            self.add(d, fld, f"Table `{d.name}`: {message}", path=path)
        return analysis.columns if analysis.columns is not None else Columns(opaque=True)

    def _aggregate(self, d: TableDefinition, cols: Columns) -> Columns:
        agg = d.spec.aggregate
        assert agg is not None
        out = Columns(opaque=cols.opaque)
        if agg.window is not None:
            self._need(
                d,
                "aggregate.window.column",
                agg.window.column,
                [cols],
                "window column",
                fix="aggregate.window.column",
            )
            wm = d.spec.watermark
            # Only when both are columns here: a source column renamed by the SQL keeps its
            # watermark, so a different name alone is not a mistake.
            if (
                wm is not None
                and wm.column.lower() != agg.window.column.lower()
                and cols.has(wm.column)
            ):
                self.add(
                    d,
                    "aggregate.window.column",
                    f"Table `{d.name}`: the window is on `{agg.window.column}` but the "
                    f"watermark is on `{wm.column}`; Spark can finalize windows and drop their "
                    "state only when both use the same event-time column. Use one column "
                    "for `watermark.column` and `aggregate.window.column`.",
                )
            out.extend(WINDOW_COLUMNS)
        for i, g in enumerate(agg.group_by):
            self._need(
                d,
                f"aggregate.group_by[{i}]",
                g,
                [cols],
                "group-by column",
                fix="aggregate.group_by",
            )
            out.append(cols.get(g) or Column(g, "string"))
        for name, expr in agg.measures.items():
            if cols.opaque:
                out.append(Column(name, "string"))
                continue
            kind, problems = expression_type(expr, cols)
            for message in problems:
                self.add(
                    d,
                    f"aggregate.measures.{name}",
                    f"Table `{d.name}`: measure `{name}` (`{expr}`): {message}",
                )
            out.append(Column(name, kind or "string"))
        return out

    def _need(
        self,
        d: TableDefinition,
        fld: str,
        name: str,
        options: list[Columns],
        what: str,
        *,
        fix: str | None = None,
        where: str | None = None,
    ) -> None:
        if any(c.opaque or c.has(name) for c in options):
            return
        if where is None:
            where = "the transform output" if (d.sql or d.python) else "the source"
            if d.spec.aggregate is not None and fld.startswith(("sink.", "expectations")):
                where = "the aggregate output"
        cols = options[-1]
        hint = did_you_mean(name, cols.names)
        self.add(
            d,
            fld,
            f"Table `{d.name}`: {what} `{name}` is not a column of {where} "
            f"({ticks(cols.names)}).{hint} Add it to the SELECT or change "
            f"`{fix or fld}`.",
        )

    def _expectation_columns(self, d: TableDefinition, cols: Columns) -> None:
        if cols.opaque:
            return
        for i, exp in enumerate(d.spec.expectations):
            for arg in self._column_args(exp.type):
                value = exp.kwargs.get(arg)
                names = value if isinstance(value, list) else [value]
                for name in names:
                    if isinstance(name, str):
                        self._need(
                            d,
                            f"expectations[{i}].{exp.type}.{arg}",
                            name,
                            [cols],
                            "expectation column",
                        )

    def _column_args(self, type_name: str) -> tuple[str, ...]:
        etype = EXPECTATION_TYPES.get(type_name)
        return tuple(etype.columns_args) if etype else ("column",)

    def _duplicates(self, d: TableDefinition, cols: Columns) -> None:
        seen: set[str] = set()
        fld, path = _output_location(d)
        for c in cols:
            if c.name.lower() in seen:
                self.add(
                    d,
                    fld,
                    f"Table `{d.name}`: column `{c.name}` appears twice in the output; "
                    "Delta needs unique column names. Alias or rename one of them.",
                    path=path,
                )
            seen.add(c.name.lower())

    def _change_feed_names(self, d: TableDefinition, cols: Columns) -> None:
        """Refuse output columns named as the change data feed's own: a reader of the
        table's changes gets `_change_type`, `_commit_version` and `_commit_timestamp`
        beside its columns, so delta-spark refuses to turn the feed on for a table with
        one of them (every table of the framework has it on: docs/architecture.md,
        "Change data feed"), and the changes of a table the Python engine wrote with one
        cannot be read."""
        reserved = {c.name for c in CHANGE_COLUMNS}
        clash = [c.name for c in cols if c.name.lower() in reserved]
        if not clash:
            return
        fld, path = _output_location(d)
        one = len(clash) == 1
        src = d.spec.source
        if (
            d.sql is None
            and d.spec.aggregate is None
            and isinstance(src, TableSource)
            and src.read == "changes"
        ):
            fix = (
                f"It reads `{src.table}` as changes without a transform, so it "
                "would store them: select the columns it keeps in `transform.sql`, under "
                "other names."
            )
        else:
            fix = f"Rename {'it' if one else 'them'} (`{clash[0]} AS {clash[0].lstrip('_')}`)."
        self.add(
            d,
            fld,
            f"Table `{d.name}`: column{'' if one else 's'} {ticks(clash)} "
            f"{'is' if one else 'are'} named as the columns Delta's change data feed adds "
            "to a table's changes: delta-spark refuses the feed on such a table, and "
            f"reading its changes fails. {fix}",
            path=path,
        )


def _output_location(d: TableDefinition) -> tuple[str, str | None]:
    """The field (and file) that decides a table's output columns."""
    if d.spec.aggregate is not None:
        return "aggregate", None
    if d.sql is not None:
        return sql_location(d)
    return "source", None
