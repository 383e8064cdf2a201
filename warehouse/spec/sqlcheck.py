"""SQL checks at load time with sqlglot (Spark dialect), no JVM.

`analyze_sql` parses a transform, lists the tables it reads, checks every column
it names against the columns of those tables, and infers the output columns
(names from the SELECT list, types from `annotate_types`). It never raises for
a user mistake: it returns the problems as sentences for the loader to locate.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from warehouse.spec.schemas import Column, Columns, SchemaFileError, normalize_type

logger = logging.getLogger(__name__)

DIALECT = "spark"
_WINDOW_STRUCT = "struct<start: timestamp, end: timestamp>"


@dataclass
class SqlAnalysis:
    """What one SQL transform reads and produces. `columns` is None when it cannot be known."""

    tables: list[str] = field(default_factory=list)
    columns: Columns | None = None
    problems: list[str] = field(default_factory=list)


def _names(cols: list[str]) -> str:
    return ", ".join(f"`{c}`" for c in cols) or "no columns"


def parse_query(sql: str) -> tuple[exp.Expression | None, str | None]:
    """Parse one SELECT (or set operation); return the tree or a sentence saying what is wrong."""
    try:
        statements = [s for s in sqlglot.parse(sql, dialect=DIALECT) if s is not None]
    except ParseError as e:
        err = e.errors[0] if e.errors else {}
        where = f" at line {err.get('line')}, column {err.get('col')}" if err.get("line") else ""
        near = f" near `{err.get('highlight')}`" if err.get("highlight") else ""
        desc = _plain(err.get("description") or str(e).splitlines()[0])
        return None, f"the SQL does not parse{where}{near}: {desc}. Fix the SQL (Spark dialect)."
    except SqlglotError as e:
        return (
            None,
            f"the SQL does not parse: {str(e).splitlines()[0]}. Fix the SQL (Spark dialect).",
        )
    if len(statements) != 1:
        return None, (
            f"the SQL has {len(statements)} statements; a transform is one SELECT "
            "(use a CTE `WITH ...` for steps)"
        )
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        return None, (
            f"the SQL is not a SELECT but `{tree.key.upper()}`; a transform is one SELECT "
            "over `source`"
        )
    return tree, None


def _plain(text: str) -> str:
    """sqlglot's parse messages without its Python reprs (`<Token ...>`, `<class ...>`)."""
    text = re.sub(r"<Token token_type: [\w.]+, text: ([^,]*),[^>]*>", r"`\1`", text)
    return re.sub(r"<class '[\w.]+\.(\w+)'>", lambda m: f"`{m.group(1).upper()}`", text)


def read_tables(tree: exp.Expression) -> list[str]:
    """Names of the real tables a query reads (CTEs and subqueries excluded), in order."""
    out: list[str] = []
    try:
        scopes = traverse_scope(tree)
    except Exception as e:  # noqa: BLE001  # sqlglot cannot scope it: fall back to table nodes
        logger.info("sqlglot cannot scope the query (%s); reading table names directly", e)
        scopes = []
        out = list(dict.fromkeys(_table_name(t) for t in tree.find_all(exp.Table) if t.name))
    for scope in scopes:
        for src in scope.sources.values():
            if isinstance(src, exp.Table) and src.name and _table_name(src) not in out:
                out.append(_table_name(src))
    return out


def _table_name(table: exp.Table) -> str:
    db = table.args.get("db")
    return f"{db.name}.{table.name}" if db is not None else table.name


def analyze_sql(
    sql: str, schema: Mapping[str, Columns], *, source_name: str = "source"
) -> SqlAnalysis:
    """Check `sql` against `schema` (table name → columns) and infer its output.

    Tables missing from `schema` are reported as unknown. Columns of opaque tables
    are not checked, and the output is opaque when it depends on them.
    """
    result = SqlAnalysis()
    tree, error = parse_query(sql)
    if tree is None:
        result.problems.append(error or "the SQL does not parse")
        return result
    result.tables = read_tables(tree)
    unknown = [t for t in result.tables if t not in schema]
    for t in unknown:
        known = [source_name, *sorted(n for n in schema if n != source_name)]
        result.problems.append(
            f"the SQL reads table `{t}`, which is neither `{source_name}` nor a table of the "
            f"project (known: {_names(known)}). Fix the name or declare the table."
        )
    checked = {**schema, **{t: Columns(opaque=True) for t in unknown}}
    try:
        result.problems.extend(_check_columns(tree, checked))
        if result.problems or any(checked[t].opaque for t in result.tables):
            return result
        result.columns = _output_columns(tree, {t: schema[t] for t in result.tables})
    except Exception as e:  # noqa: BLE001  # sqlglot on SQL it does not model: check less
        logger.warning(
            "column checks skipped: sqlglot failed on %r: %s: %s", sql, type(e).__name__, e
        )
        result.columns = None
    return result


def _scope_outputs(scope: Scope, available: Mapping[str, list[str] | None]) -> list[str] | None:
    """Output names of a (sub)query scope, expanding `*` and `t.*` from its sources."""
    if not isinstance(scope.expression, exp.Select):
        selects = scope.expression.named_selects if isinstance(scope.expression, exp.Query) else []
        return None if "*" in selects or not selects else list(selects)
    out: list[str] = []
    for select in scope.expression.selects:
        if isinstance(select, exp.Star):
            parts = list(available.values())
        elif isinstance(select, exp.Column) and isinstance(select.this, exp.Star):
            parts = [available.get(select.table)]
        else:
            out.append(select.alias_or_name)
            continue
        if any(p is None for p in parts):
            return None
        out.extend(n for p in parts for n in p or [])
    return out


def _check_columns(tree: exp.Expression, schema: Mapping[str, Columns]) -> list[str]:
    problems: list[str] = []
    try:
        scopes = traverse_scope(tree)
    except SqlglotError as e:
        logger.info("sqlglot cannot scope the query (%s); column checks skipped", e)
        return problems

    outputs: dict[int, list[str] | None] = {}  # scopes come inner first
    seen: set[int] = set()

    def available(scope: Scope) -> dict[str, list[str] | None]:
        # Not cached: an outer scope's sources gain outputs as its inner scopes are done.
        found: dict[str, list[str] | None] = {}
        for alias, src in scope.sources.items():
            if isinstance(src, exp.Table):
                cols = schema.get(_table_name(src))
                found[alias] = None if cols is None or cols.opaque else cols.names
            elif isinstance(src, Scope):
                found[alias] = outputs.get(id(src))
            else:
                found[alias] = None
        return found

    for scope in scopes:
        here = available(scope)
        # Correlated subqueries and LATERAL see the sources of the scopes around them.
        chain: list[dict[str, list[str] | None]] = []
        outer: Scope | None = scope
        while outer is not None:
            chain.append(available(outer))
            outer = outer.parent
        aliases = {
            s.alias
            for s in getattr(scope.expression, "expressions", [])
            if isinstance(s, exp.Alias)
        }
        for col in scope.columns:
            if id(col) in seen:  # a subquery's column, checked in its own (inner) scope
                continue
            seen.add(id(col))
            problem = _column_problem(scope, col, chain, aliases)
            if problem:
                problems.append(problem)
        outputs[id(scope)] = _scope_outputs(scope, here)
    return problems


def _column_problem(
    scope: Scope,
    col: exp.Column,
    chain: list[dict[str, list[str] | None]],
    aliases: set[str],
) -> str | None:
    parts = [p.name for p in col.parts]
    every = [cs for level in chain for cs in level.values()]
    if len(parts) >= 2:
        qual, name = parts[0], parts[1]
        level = next((lv for lv in chain if qual in lv), None)
        if level is None:
            # `payload.city`: a struct field of a column, not a table alias
            if any(cs is None or _has(cs, qual) for cs in every):
                return None
            return (
                f"`{'.'.join(parts)}` names `{qual}`, which is neither a table or alias in this "
                f"query (there: {_names([a for lv in chain for a in lv if a])}) nor a column"
            )
        cols = level[qual]
        if cols is None or _has(cols, name):
            return None
        return (
            f"column `{name}` is not a column of {_source_label(scope, qual)} "
            f"(columns: {_names(cols)}). Fix the name or select it upstream."
        )
    name = parts[0]
    if name in aliases or any(cs is None for cs in every):
        return None
    if any(_has(cs or [], name) for cs in every):
        return None
    listed = "; ".join(
        f"{_source_label(scope, a)}: {_names(cs or [])}" for lv in chain for a, cs in lv.items()
    )
    return (
        f"column `{name}` is not a column of any table in the query ({listed}). "
        "Fix the name or select it upstream."
    )


def _has(cols: list[str], name: str) -> bool:
    low = name.lower()
    return any(c.lower() == low for c in cols)


def _source_label(scope: Scope, alias: str) -> str:
    src = scope.sources.get(alias)
    if isinstance(src, exp.Table) and src.name != alias:
        return f"`{src.name}` (as `{alias}`)"
    return f"`{alias}`"


def _output_columns(tree: exp.Expression, schema: Mapping[str, Columns]) -> Columns | None:
    mapping = {t: {c.name: c.type for c in cols} for t, cols in schema.items()}
    try:
        qualified = qualify(
            tree.copy(),
            schema=mapping,
            dialect=DIALECT,
            validate_qualify_columns=False,
            quote_identifiers=False,
        )
        typed = annotate_types(qualified, schema=mapping, dialect=DIALECT)
    except SqlglotError as e:
        logger.info("sqlglot cannot type the query (%s); its columns are treated as opaque", e)
        return None
    out = Columns()
    for select in typed.selects:
        name = select.alias_or_name
        if name == "*":
            return None
        out.append(Column(name, spark_type(select)))
    return out


def spark_type(node: exp.Expression) -> str:
    """The Spark type string of an annotated expression; `string` when sqlglot cannot tell."""
    inner = node.this if isinstance(node, exp.Alias) else node
    if isinstance(inner, exp.Anonymous) and inner.name.lower() in ("window", "session_window"):
        return _WINDOW_STRUCT
    known = _known_result_type(inner)
    if known is not None:
        return known
    dtype = node.type
    if dtype is None or dtype.is_type(exp.DataType.Type.UNKNOWN):
        return "string"
    if isinstance(inner, (exp.Sum, exp.Avg)) and inner.this.type is not None:
        return _aggregate_type(inner, inner.this.type)
    try:
        return normalize_type(dtype.sql(dialect=DIALECT))
    except SchemaFileError:
        return "string"


# Spark result types that sqlglot's generic typing gets wrong or leaves unknown.
_RESULT_TYPES = {
    **dict.fromkeys(
        [
            "year",
            "month",
            "day",
            "dayofmonth",
            "dayofweek",
            "dayofyear",
            "weekofyear",
            "quarter",
            "hour",
            "minute",
            "second",
            "hash",
        ],
        "int",
    ),
    **dict.fromkeys(
        ["date_trunc", "timestamp_seconds", "timestamp_millis", "timestamp_micros"], "timestamp"
    ),
    "make_date": "date",
    "xxhash64": "bigint",
}
_FUNCTION_NAME_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def _type_text(dtype: exp.Expression) -> str:
    try:
        return normalize_type(dtype.sql(dialect=DIALECT))
    except SchemaFileError:
        return "string"


def _known_result_type(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Dot) and isinstance(node.this, exp.Anonymous):
        if node.this.name.lower() in ("window", "session_window"):  # window(...).start
            return "timestamp"
    if isinstance(node, exp.Bracket) and node.this.type is not None:  # m['k'], a[0]
        container = node.this.type
        if container.is_type(exp.DataType.Type.MAP) and len(container.expressions) == 2:
            return _type_text(container.expressions[1])
        if container.is_type(exp.DataType.Type.ARRAY) and container.expressions:
            return _type_text(container.expressions[0])
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        floating = (exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE)
        sides = [t for t in (node.left.type, node.right.type) if t is not None]
        if any(t.is_type(*floating) for t in sides) and any(
            t.is_type(exp.DataType.Type.DECIMAL) for t in sides
        ):
            return "double"  # Spark widens decimal with float/double to double
    if not isinstance(node, exp.Func):
        return None
    m = _FUNCTION_NAME_RE.match(node.sql(dialect=DIALECT))
    name = m.group(1).lower() if m else ""
    if name == "collect_set" and node.this is not None and node.this.type is not None:
        return f"array<{spark_type(node.this)}>"
    return _RESULT_TYPES.get(name)


def _aggregate_type(node: exp.Expression, arg: exp.DataType) -> str:
    """Spark's result types for `sum`/`avg`, which sqlglot leaves as the argument's type."""
    if arg.is_type(*exp.DataType.INTEGER_TYPES):
        return "bigint" if isinstance(node, exp.Sum) else "double"
    if arg.is_type(exp.DataType.Type.DECIMAL):
        params = [int(p.name) for p in arg.expressions if p.name.isdigit()]
        precision, scale = (params + [10, 0])[:2] if params else (10, 0)
        if isinstance(node, exp.Sum):
            return f"decimal({min(38, precision + 10)},{scale})"
        return f"decimal({min(38, precision + 4)},{min(38, scale + 4)})"
    if arg.is_type(*exp.DataType.REAL_TYPES):
        return "double"
    return spark_type(node.this) if isinstance(node, exp.Sum) else "double"


def expression_type(expression: str, columns: Columns) -> tuple[str | None, list[str]]:
    """Type of one aggregate/measure expression over `columns`, and the problems in it."""
    analysis = analyze_sql(f"SELECT {expression} AS _m FROM source", {"source": columns})
    if analysis.problems or analysis.columns is None:
        return None, analysis.problems
    return analysis.columns[0].type, []
