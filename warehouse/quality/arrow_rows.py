"""Row-level expectations judged in Arrow, inside the Arrow landing tasks.

`arrow_checks(expectations, schema)` compiles a table's row-level expectations into an
`ArrowChecks` (a `streams.landing.RowRules`), or returns None when one of them cannot
be judged in Arrow exactly as its Spark predicate (`warehouse.quality.predicates`)
judges it; the table then keeps Spark's parse. Judged in Arrow:

- `expect_column_values_to_not_be_null`, `expect_column_values_to_be_null`;
- `expect_column_values_to_be_between` on an integer or floating column with number
  bounds (a NaN compares above every number, as in Spark);
- `expect_column_value_lengths_to_be_between`, `expect_column_value_lengths_to_equal`
  on a string column (length in characters, as Spark's `length`);
- `expect_column_values_to_be_in_set`, `..._to_not_be_in_set` on a string, integer or
  boolean column whose set holds values of that kind only (no null);
- `expect_column_pair_values_a_to_be_greater_than_b` on two numeric or two string
  columns.

Not judged in Arrow (the table keeps Spark's parse): regular expressions (Java's and
RE2's syntax and semantics differ: `.`, `$`, `\\s`, flags), the type checks, a set or
bound of another kind than its column (Spark's type coercion decides those), and any
expectation with `on_violation: fail`, which must see the whole batch first.

The semantics are those of `warehouse.quality.rows`: a row is judged by an
expectation unless its column is null (the null checks judge every row); `quarantine`
holds the row (it then lists every expectation it failed, as on Spark's path),
`drop` removes it, `warn` keeps it. The held rows' quarantine rows are built after the
tasks, on the driver (`warehouse.quality.arrow_quarantine.HeldRows`, with
`ArrowChecks.failed_ids`) or by Spark (`RowChecks.quarantined`), with Spark's reasons.

No Spark import: this runs inside Spark's Python workers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streams.landing import RowVerdict

if TYPE_CHECKING:
    from warehouse.spec.table import Expectation

_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class ArrowRule:
    """One compiled expectation: `kind` says how `columns` and `args` are judged."""

    id: str
    action: str  # "quarantine", "drop" or "warn"
    kind: str
    columns: tuple[str, ...]
    args: tuple[tuple[str, Any], ...] = ()

    def arg(self, name: str) -> Any:
        return dict(self.args).get(name)


def _number(value: Any) -> bool:
    """A finite int (in int64) or float bound, not a bool."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return _INT64[0] <= value <= _INT64[1]
    return isinstance(value, float) and math.isfinite(value)


def _kind_of(t: pa.DataType) -> str | None:
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_boolean(t):
        return "bool"
    return None


def _set_fits(values: Sequence[Any], kind: str | None) -> bool:
    if kind == "string":
        return all(isinstance(v, str) for v in values)
    if kind == "int":
        return all(isinstance(v, int) and not isinstance(v, bool) and _number(v) for v in values)
    if kind == "bool":
        return all(isinstance(v, bool) for v in values)
    return False  # floats: Spark's equality of -0.0 and 0.0 is not Arrow's hashing


def _bounds(kw: dict[str, Any]) -> tuple[tuple[str, Any], ...] | None:
    out = []
    for name in ("min_value", "max_value"):
        value = kw.get(name)
        if value is not None and not _number(value):
            return None
        out.append((name, value))
    out += [("strict_min", bool(kw.get("strict_min"))), ("strict_max", bool(kw.get("strict_max")))]
    return tuple(out)


def _pair_rule(eid: str, act: str, kw: dict[str, Any], schema: pa.Schema) -> ArrowRule | None:
    """`column_A > column_B` (or `>=`) compiled, when both are numbers or both strings."""
    a, b = kw.get("column_A"), kw.get("column_B")
    if a not in schema.names or b not in schema.names:
        return None
    ka, kb = _kind_of(schema.field(a).type), _kind_of(schema.field(b).type)
    numeric = ka in ("int", "float") and kb in ("int", "float")
    if not (numeric or ka == kb == "string"):
        return None
    return ArrowRule(eid, act, "pair", (a, b), (("or_equal", bool(kw.get("or_equal"))),))


def _rule(exp: Expectation, eid: str, schema: pa.Schema) -> ArrowRule | None:
    """`exp` (its id `eid`) compiled, or None when Arrow cannot judge it as Spark does."""
    kw = dict(exp.kwargs)
    names = schema.names
    act, t = exp.on_violation, exp.type
    if t == "expect_column_pair_values_a_to_be_greater_than_b":
        return _pair_rule(eid, act, kw, schema)
    column = kw.get("column")
    if column not in names:
        return None  # Spark's compile names the column in its error
    kind = _kind_of(schema.field(column).type)
    if t == "expect_column_values_to_not_be_null":
        return ArrowRule(eid, act, "not_null", (column,))
    if t == "expect_column_values_to_be_null":
        return ArrowRule(eid, act, "null", (column,))
    if t == "expect_column_values_to_be_between" and kind in ("int", "float"):
        bounds = _bounds(kw)
        return None if bounds is None else ArrowRule(eid, act, "between", (column,), bounds)
    if t == "expect_column_value_lengths_to_be_between" and kind == "string":
        bounds = _bounds(kw)
        return None if bounds is None else ArrowRule(eid, act, "length", (column,), bounds)
    if t == "expect_column_value_lengths_to_equal" and kind == "string":
        value = kw.get("value")
        if not _number(value):
            return None
        bounds = (("min_value", value), ("max_value", value), ("strict_min", False))
        return ArrowRule(eid, act, "length", (column,), (*bounds, ("strict_max", False)))
    if t in ("expect_column_values_to_be_in_set", "expect_column_values_to_not_be_in_set"):
        values = list(kw.get("value_set") or [])
        if not _set_fits(values, kind):
            return None
        rule_kind = "in_set" if t == "expect_column_values_to_be_in_set" else "not_in_set"
        return ArrowRule(eid, act, rule_kind, (column,), (("values", tuple(values)),))
    return None


def _compare(v: Any, rule: ArrowRule, nan: Any) -> Any:
    """`rule`'s bounds on `v` (a numeric array, no nulls where it matters); `nan`: a mask
    of NaN values or None. Spark orders NaN above every number."""
    ok = None
    lo, hi = rule.arg("min_value"), rule.arg("max_value")
    if lo is not None:
        above = pc.greater(v, lo) if rule.arg("strict_min") else pc.greater_equal(v, lo)
        if nan is not None:
            above = pc.or_kleene(above, nan)
        ok = above
    if hi is not None:
        below = pc.less(v, hi) if rule.arg("strict_max") else pc.less_equal(v, hi)
        if nan is not None:
            below = pc.and_kleene(below, pc.invert(nan))
        ok = below if ok is None else pc.and_kleene(ok, below)
    return ok if ok is not None else pc.is_valid(v)


def _fails(applies: Any, passes: Any) -> Any:
    """Where a rule fails: it applies and does not pass (never null)."""
    fails = pc.invert(passes) if applies is None else pc.and_kleene(applies, pc.invert(passes))
    return pc.fill_null(fails, False)


def _judge(rule: ArrowRule, rows: pa.RecordBatch) -> tuple[Any, Any]:
    """(applies, passes) of `rule` on `rows`, as boolean arrays (passes may hold nulls
    where applies is false)."""
    col = rows.column(rule.columns[0])
    if rule.kind == "not_null":
        return None, pc.is_valid(col)
    if rule.kind == "null":
        return None, pc.is_null(col)
    applies = pc.is_valid(col)
    if rule.kind == "pair":
        other = rows.column(rule.columns[1])
        applies = pc.and_(applies, pc.is_valid(other))
        a, b = col, other
        if pa.types.is_floating(a.type) or pa.types.is_floating(b.type):
            a, b = a.cast(pa.float64()), b.cast(pa.float64())
        or_equal = bool(rule.arg("or_equal"))
        passes = pc.greater_equal(a, b) if or_equal else pc.greater(a, b)
        if pa.types.is_floating(a.type):  # Spark: NaN = NaN, and NaN > every number
            na, nb = pc.is_nan(a), pc.is_nan(b)
            passes = pc.if_else(na, pc.if_else(nb, or_equal, True), pc.if_else(nb, False, passes))
        return applies, passes
    if rule.kind == "between":
        nan = pc.is_nan(col) if pa.types.is_floating(col.type) else None
        return applies, _compare(col, rule, nan)
    if rule.kind == "length":
        return applies, _compare(pc.utf8_length(col), rule, None)
    values = rule.arg("values")
    if pa.types.is_integer(col.type):
        found = pc.is_in(col.cast(pa.int64()), value_set=pa.array(values, pa.int64()))
    else:
        found = pc.is_in(col, value_set=pa.array(values, col.type))
    return applies, found if rule.kind == "in_set" else pc.invert(found)


@dataclass(frozen=True)
class ArrowChecks:
    """A table's row-level expectations as `streams.landing.RowRules`, in the order of
    `RowChecks` (so counts line up with its metrics)."""

    rules: tuple[ArrowRule, ...]

    @property
    def size(self) -> int:
        return len(self.rules)

    def judge(self, rows: pa.RecordBatch) -> RowVerdict:
        n = rows.num_rows
        removed = held = None
        checked, failed = [], []
        for rule in self.rules:
            applies, passes = _judge(rule, rows)
            fails = _fails(applies, passes)
            checked.append(n if applies is None else pc.sum(applies.cast(pa.int64())).as_py() or 0)
            failed.append(pc.sum(fails.cast(pa.int64())).as_py() or 0)
            if rule.action == "warn" or not failed[-1]:
                continue
            removed = fails if removed is None else pc.or_(removed, fails)
            if rule.action == "quarantine":
                held = fails if held is None else pc.or_(held, fails)
        keep = pa.repeat(True, n) if removed is None else pc.invert(removed)
        hold = pa.repeat(False, n) if held is None else held
        return RowVerdict(keep, hold, tuple(checked), tuple(failed))

    def failed_ids(self, rows: pa.RecordBatch | pa.Table) -> pa.Array:
        """Per row, the ids of the rules it fails, in the rules' order (what
        `RowChecks.quarantined` lists in a quarantine row's `failed_expectations`)."""
        n = rows.num_rows
        fails = np.zeros((n, len(self.rules)), dtype=bool)
        for i, rule in enumerate(self.rules):
            f = _fails(*_judge(rule, rows))
            fails[:, i] = f.to_numpy(zero_copy_only=False)
        where_row, where_rule = np.nonzero(fails)  # row by row, rules in order
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(where_row, minlength=n), out=offsets[1:])
        ids = pa.array([r.id for r in self.rules], pa.string())
        return pa.ListArray.from_arrays(pa.array(offsets), ids.take(pa.array(where_rule)))


def arrow_checks(expectations: Sequence[Expectation], schema: pa.Schema) -> ArrowChecks | None:
    """The row-level expectations of a table whose typed rows have `schema`, judged in
    Arrow; None when one of them is not judged in Arrow (module doc)."""
    # Here, not at the module's import: a Python worker unpickling an `ArrowChecks`
    # imports this module and needs none of the spec (pydantic, the project's models).
    from warehouse.spec.expectations import expectation_id, is_row_level

    rules = []
    for exp in expectations:
        if not is_row_level(exp):
            continue
        if exp.on_violation not in ("quarantine", "drop", "warn"):
            return None
        rule = _rule(exp, expectation_id(exp), schema)
        if rule is None:
            return None
        rules.append(rule)
    return ArrowChecks(tuple(rules))
