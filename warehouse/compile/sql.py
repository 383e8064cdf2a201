"""SQL transforms: the text of a table's SQL, the tables it names, and view renaming.

The streaming input is `source` in user SQL; at run time it becomes a temp view
with a name unique to the query (several queries share one session), so the
SQL is rewritten with sqlglot: each reference to `source` (or to another
table) is pointed at its view and keeps its name as alias.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from warehouse.compile.errors import CompileError

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject
    from warehouse.spec.table import TableDefinition

SOURCE_VIEW = "source"


def sql_text(project: LoadedProject, defn: TableDefinition) -> str | None:
    """The table's SQL (inline or from `sql_file`, resolved beside its YAML), or None."""
    t = defn.spec.transform
    if defn.sql is not None:
        return defn.sql  # resolved by the loader (inline, `sql_file` or `<stem>.sql`)
    if t is None or t.python:
        return None
    if t.sql is not None:
        return t.sql
    assert t.sql_file is not None
    candidates = [Path(defn.path).parent / t.sql_file, _project_dir(project) / t.sql_file]
    for c in candidates:
        if c.is_file():
            return c.read_text()
    raise CompileError(
        f"Table `{defn.name}` ({defn.path}): `transform.sql_file` `{t.sql_file}` does not exist "
        f"(looked in {', '.join(str(c) for c in candidates)}). Fix the path.",
        table=defn.name,
    )


def _project_dir(project: LoadedProject) -> Path:
    return Path(project.path)


def _parse(sql: str, table: str):  # -> sqlglot.exp.Expression
    import sqlglot
    from sqlglot.errors import ParseError

    try:
        return sqlglot.parse_one(sql, read="spark")
    except ParseError as e:
        raise CompileError(f"Table `{table}`: the SQL transform does not parse: {e}") from e


def rewrite_views(sql: str, views: dict[str, str], *, table: str) -> str:
    """Point each unqualified table reference in `views` at its view; keep the old name as alias."""
    from sqlglot import exp

    tree = _parse(sql, table)
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}

    def swap(node: exp.Expression) -> exp.Expression:
        if (
            isinstance(node, exp.Table)
            and not node.db
            and node.name in views
            and node.name not in ctes
        ):
            alias = node.alias or node.name
            return exp.Table(
                this=exp.to_identifier(views[node.name]),
                alias=exp.TableAlias(this=exp.to_identifier(alias)),
            )
        return node

    return tree.transform(swap).sql(dialect="spark")


def grouped_output(sql: str, *, table: str) -> frozenset[str] | None:
    """The output names of the GROUP BY columns of a query that ends in a plain grouping
    (each batch of it then holds one row per group), or None when the query is anything
    else: no GROUP BY at its top, a grouping expression that is not a column selected as
    it is, grouping sets, or a generator or lateral view that makes rows of a group's."""
    from sqlglot import exp

    root = _parse(sql, table)
    group = root.args.get("group") if isinstance(root, exp.Select) else None
    if group is None or any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets")):
        return None
    if root.args.get("laterals") or any(root.find_all(exp.Explode, exp.Inline)):
        return None
    selected = []  # (column, its output name)
    for e in root.expressions:
        inner = e.this if isinstance(e, exp.Alias) else e
        if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
            selected.append((inner, e.alias_or_name))
    names = []
    for g in group.expressions:
        if not isinstance(g, exp.Column):
            return None
        same = [
            out
            for c, out in selected
            if c.name == g.name and (c.table == g.table or not c.table or not g.table)
        ]
        if not same:
            return None
        names.append(same[0])
    return frozenset(names)
