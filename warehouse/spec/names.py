"""Tables by their catalog names (`catalog:` in `conf/<env>.yml`).

A SQL transform, a `source: {table: ...}` and its `join_streams` may name another table
of the project as the catalog knows it, `schema.table` or `catalog.schema.table`, as a
user who reads the tables by name writes it. When the project loads, such a reference is
pointed at the framework's table (its unqualified name; in SQL with the written name's
alias), so the graph, the layer order, the column checks and the snapshots see the same
table as an unqualified name would: the catalog is never asked which table a name means.
A qualified name that is no table of the project stays as written, and the checks name it
as a table that does not exist. No Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlglot import exp

from warehouse.spec.config import CatalogSettings
from warehouse.spec.sqlcheck import parse_query
from warehouse.spec.table import TableDefinition, TableSource


def catalog_names(
    catalog: CatalogSettings, definitions: Iterable[TableDefinition]
) -> dict[str, str]:
    """Each table's `schema.table` and `catalog.schema.table` (lower-case, as the catalog
    compares them) → the table's name."""
    out: dict[str, str] = {}
    for d in definitions:
        full = catalog.name(d.name, d.layer).lower()
        out[full] = d.name
        out[full.split(".", 1)[1]] = d.name
    return out


def _written(table: exp.Table) -> str | None:
    """A qualified table reference as written (`db.t`, `cat.db.t`), lower-case; None when
    it is not qualified."""
    if not table.args.get("db"):
        return None
    return ".".join(p.name for p in table.parts).lower()


def resolve_names(sql: str, names: Mapping[str, str]) -> str | None:
    """`sql` with each catalog name of a project table replaced by the table's name (its
    alias kept, the name as alias where none was written); None when it names none (or
    does not parse: the checks report that with its location)."""
    tree, _ = parse_query(sql)
    if tree is None:
        return None
    found = False

    def swap(node: exp.Expression) -> exp.Expression:
        nonlocal found
        if isinstance(node, exp.Table):
            written = _written(node)
            if written is not None and written in names:
                found = True
                alias = node.alias or node.name
                return exp.Table(
                    this=exp.to_identifier(names[written]),
                    alias=exp.TableAlias(this=exp.to_identifier(alias)),
                )
        return node

    out = tree.transform(swap)
    return out.sql(dialect="spark", pretty=True) if found else None


def _source_with_names(source: TableSource, names: Mapping[str, str]) -> TableSource:
    """`source` with the catalog names of its table and join streams replaced by the
    tables' names (`names` holds qualified names only)."""

    def name(written: str) -> str:
        return names.get(written.lower(), written)

    joins = [j.model_copy(update={"table": name(j.table)}) for j in source.join_streams]
    return source.model_copy(update={"table": name(source.table), "join_streams": joins})


def with_catalog_names(
    catalog: CatalogSettings | None, definitions: list[TableDefinition]
) -> list[TableDefinition]:
    """`definitions` with the catalog names in their SQL (`resolve_names`), source table
    and join streams resolved."""
    if catalog is None:
        return definitions
    names = catalog_names(catalog, definitions)
    out = []
    for d in definitions:
        update: dict[str, object] = {}
        resolved = resolve_names(d.sql, names) if d.sql is not None else None
        if resolved is not None:
            update["sql"] = resolved
        source = d.spec.source
        if isinstance(source, TableSource):
            named = _source_with_names(source, names)
            if named != source:
                update["spec"] = d.spec.model_copy(update={"source": named})
        out.append(d.model_copy(update=update) if update else d)
    return out
