"""The expectation types a table may declare, with their arguments and where they run.

No Spark import: the project loader calls `validate` for every expectation when
a project loads, so a typo in a type or an argument fails there (exit 2, file
and field named) and never at `query.start()`.

Two levels:

- **row-level** types judge each row on its own. They compile to Spark
  predicates enforced inside the stream (`warehouse.quality.rows`) according to
  `on_violation`, and also run in `warehouse check`.
- **table-level** types need the whole table (uniqueness, row counts,
  aggregates, freshness). They run only in `warehouse check`; their
  `on_violation` must stay `warn` (a failure there makes the check exit 1).

The names and arguments are great-expectations 1.x's, except those marked
`extension`, which the warehouse evaluates itself next to the GE suite
(`expect_column_values_to_be_fresh`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from warehouse.spec.table import INTERVAL_RE, Expectation

Level = Literal["row", "table"]
# Argument kinds: "str" non-empty string, "int", "number" (int or float), "bool",
# "comparable" (number or string, e.g. an ISO date), "list" (non-empty list of scalars),
# "str_list" (non-empty list of strings), "fraction" (0 < x <= 1), "interval" ("1 hour").
ArgKind = Literal[
    "str", "int", "number", "bool", "comparable", "list", "str_list", "fraction", "interval"
]


@dataclass(frozen=True)
class Arg:
    kind: ArgKind
    required: bool = False


@dataclass(frozen=True)
class ExpectationType:
    """One supported expectation type: its arguments and where it is enforced."""

    name: str
    level: Level
    args: Mapping[str, Arg]
    # At least one of these must be given (GE's between-style expectations).
    one_of: tuple[str, ...] = ()
    extension: bool = False
    description: str = ""
    columns_args: tuple[str, ...] = field(default=("column",))

    @property
    def row_level(self) -> bool:
        return self.level == "row"


_COLUMN = {"column": Arg("str", required=True)}
_MOSTLY = {"mostly": Arg("fraction")}
_BOUNDS = {
    "min_value": Arg("comparable"),
    "max_value": Arg("comparable"),
    "strict_min": Arg("bool"),
    "strict_max": Arg("bool"),
}
_INT_BOUNDS = {
    "min_value": Arg("int"),
    "max_value": Arg("int"),
    "strict_min": Arg("bool"),
    "strict_max": Arg("bool"),
}


def _t(name: str, level: Level, args: Mapping[str, Arg], description: str, **kw: Any):
    return ExpectationType(name=name, level=level, args=args, description=description, **kw)


# A table, one expectation type per entry, aligned by hand.
# fmt: off
_TYPES: tuple[ExpectationType, ...] = (
    # Row-level: enforced in the stream, and checked again by `warehouse check`.
    _t("expect_column_values_to_not_be_null", "row", {**_COLUMN, **_MOSTLY},
       "the column is not null"),
    _t("expect_column_values_to_be_null", "row", {**_COLUMN, **_MOSTLY},
       "the column is null"),
    _t("expect_column_values_to_be_between", "row", {**_COLUMN, **_BOUNDS, **_MOSTLY},
       "min_value <= value <= max_value (strict_min/strict_max exclude the bound)",
       one_of=("min_value", "max_value")),
    _t("expect_column_values_to_be_in_set", "row",
       {**_COLUMN, "value_set": Arg("list", required=True), **_MOSTLY},
       "the value is one of value_set"),
    _t("expect_column_values_to_not_be_in_set", "row",
       {**_COLUMN, "value_set": Arg("list", required=True), **_MOSTLY},
       "the value is none of value_set"),
    _t("expect_column_values_to_match_regex", "row",
       {**_COLUMN, "regex": Arg("str", required=True), **_MOSTLY},
       "the value contains a match of regex (anchor it with ^...$ for a full match)"),
    _t("expect_column_values_to_not_match_regex", "row",
       {**_COLUMN, "regex": Arg("str", required=True), **_MOSTLY},
       "the value contains no match of regex"),
    _t("expect_column_values_to_be_of_type", "row",
       {**_COLUMN, "type_": Arg("str", required=True), **_MOSTLY},
       "the column has the Spark type type_ (e.g. `string`, `bigint`, `LongType`)"),
    _t("expect_column_values_to_be_in_type_list", "row",
       {**_COLUMN, "type_list": Arg("str_list", required=True), **_MOSTLY},
       "the column has one of the Spark types in type_list"),
    _t("expect_column_value_lengths_to_be_between", "row",
       {**_COLUMN, **_INT_BOUNDS, **_MOSTLY},
       "min_value <= length(value) <= max_value", one_of=("min_value", "max_value")),
    _t("expect_column_value_lengths_to_equal", "row",
       {**_COLUMN, "value": Arg("int", required=True), **_MOSTLY},
       "length(value) == value"),
    _t("expect_column_pair_values_a_to_be_greater_than_b", "row",
       {"column_A": Arg("str", required=True), "column_B": Arg("str", required=True),
        "or_equal": Arg("bool"), **_MOSTLY},
       "column_A > column_B (>= with or_equal); rows where either is null are not judged",
       columns_args=("column_A", "column_B")),
    # Table-level: `warehouse check` only.
    _t("expect_column_values_to_be_unique", "table", {**_COLUMN, **_MOSTLY},
       "no value of the column appears twice (nulls are ignored)"),
    _t("expect_compound_columns_to_be_unique", "table",
       {"column_list": Arg("str_list", required=True), **_MOSTLY},
       "no combination of the columns appears twice", columns_args=("column_list",)),
    _t("expect_table_row_count_to_be_between", "table",
       {"min_value": Arg("int"), "max_value": Arg("int"),
        "strict_min": Arg("bool"), "strict_max": Arg("bool")},
       "the table has between min_value and max_value rows",
       one_of=("min_value", "max_value"), columns_args=()),
    _t("expect_column_max_to_be_between", "table", {**_COLUMN, **_BOUNDS},
       "the column's maximum is within the bounds", one_of=("min_value", "max_value")),
    _t("expect_column_min_to_be_between", "table", {**_COLUMN, **_BOUNDS},
       "the column's minimum is within the bounds", one_of=("min_value", "max_value")),
    _t("expect_column_mean_to_be_between", "table", {**_COLUMN, **_BOUNDS},
       "the column's mean is within the bounds", one_of=("min_value", "max_value")),
    _t("expect_column_values_to_be_fresh", "table",
       {**_COLUMN, "max_age": Arg("interval", required=True)},
       "warehouse extension: the newest value of a timestamp column is at most max_age old "
       "when `warehouse check` runs", extension=True),
)
# fmt: on

EXPECTATION_TYPES: Mapping[str, ExpectationType] = {t.name: t for t in _TYPES}
"""Every supported type by name."""

ROW_LEVEL: frozenset[str] = frozenset(t.name for t in _TYPES if t.level == "row")
TABLE_LEVEL: frozenset[str] = frozenset(t.name for t in _TYPES if t.level == "table")


def get(type_name: str) -> ExpectationType:
    """The registered type; raises `KeyError` naming the closest known types."""
    try:
        return EXPECTATION_TYPES[type_name]
    except KeyError:
        raise KeyError(_unknown_type_message(type_name)) from None


def is_row_level(expectation: Expectation) -> bool:
    """True when the expectation is enforced in the stream (a known row-level type)."""
    return expectation.type in ROW_LEVEL


def expectation_id(expectation: Expectation) -> str:
    """The name used in metrics, quarantine rows and reports: `name`, or type(columns)."""
    if expectation.name:
        return expectation.name
    etype = EXPECTATION_TYPES.get(expectation.type)
    cols: list[str] = []
    for arg in etype.columns_args if etype else ("column",):
        value = expectation.kwargs.get(arg)
        if isinstance(value, list):
            cols.extend(str(v) for v in value)
        elif value is not None:
            cols.append(str(value))
    return f"{expectation.type}({', '.join(cols)})"


def interval_seconds(value: str) -> float:
    """`"1 hour"` -> 3600.0 (the same interval syntax as watermarks)."""
    m = re.match(r"^\s*(\d+)\s+([a-z]+?)s?\s*$", value.strip(), re.IGNORECASE)
    if not m or not INTERVAL_RE.match(value):
        raise ValueError(f"`{value}` is not an interval; write e.g. `1 hour` or `30 minutes`")
    unit = m.group(2).lower()
    factor = {
        "millisecond": 0.001,
        "second": 1,
        "minute": 60,
        "hour": 3600,
        "day": 86400,
        "week": 604800,
    }[unit]
    return int(m.group(1)) * factor


def _unknown_type_message(type_name: str) -> str:
    close = difflib.get_close_matches(type_name, EXPECTATION_TYPES, n=3, cutoff=0.6)
    hint = (
        "did you mean " + " or ".join(f"`{c}`" for c in close) + "?"
        if close
        else "see docs/quality.md for the supported types"
    )
    return f"unknown expectation type `{type_name}`; {hint}"


def _kind_problem(kind: ArgKind, value: Any) -> str | None:
    """None when `value` fits `kind`, else what was expected."""
    is_bool = isinstance(value, bool)
    is_num = isinstance(value, int | float) and not is_bool
    if kind == "str":
        return None if isinstance(value, str) and value else "a non-empty string"
    if kind == "int":
        return None if isinstance(value, int) and not is_bool else "an integer"
    if kind == "number":
        return None if is_num else "a number"
    if kind == "bool":
        return None if is_bool else "`true` or `false`"
    if kind == "comparable":
        return None if is_num or isinstance(value, str) else "a number or a string (e.g. a date)"
    if kind == "fraction":
        return None if is_num and 0 < value <= 1 else "a number in (0, 1]"
    if kind == "interval":
        return (
            None
            if isinstance(value, str) and INTERVAL_RE.match(value)
            else ("an interval such as `1 hour` or `30 minutes`")
        )
    if kind in ("list", "str_list"):
        if not isinstance(value, list) or not value:
            return "a non-empty list"
        if kind == "str_list" and not all(isinstance(v, str) and v for v in value):
            return "a non-empty list of strings"
        if any(isinstance(v, dict | list) for v in value):
            return "a list of plain values (no nested lists or maps)"
        return None
    raise AssertionError(kind)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate(expectation: Expectation) -> list[str]:
    """Problems with one declared expectation; an empty list when it is fine.

    Each message names the offending value in backticks and what to write
    instead; the loader prefixes the file and field.
    """
    etype = EXPECTATION_TYPES.get(expectation.type)
    if etype is None:
        return [_unknown_type_message(expectation.type)]
    problems: list[str] = []
    kwargs = expectation.kwargs
    allowed = ", ".join(f"`{a}`" for a in etype.args)
    for key in kwargs:
        if key not in etype.args:
            close = difflib.get_close_matches(str(key), etype.args, n=1, cutoff=0.6)
            hint = f"did you mean `{close[0]}`? " if close else ""
            problems.append(
                f"`{etype.name}` has no argument `{key}`; {hint}its arguments are {allowed}"
            )
    for key, arg in etype.args.items():
        if key not in kwargs or kwargs[key] is None:
            if arg.required:
                problems.append(f"`{etype.name}` needs the argument `{key}`")
            continue
        wrong = _kind_problem(arg.kind, kwargs[key])
        if wrong:
            problems.append(
                f"`{etype.name}`: argument `{key}` is `{_shown(kwargs[key])}`; expected {wrong}"
            )
    if etype.one_of and all(kwargs.get(k) is None for k in etype.one_of):
        problems.append(
            f"`{etype.name}` needs at least one of " + " or ".join(f"`{k}`" for k in etype.one_of)
        )
    problems.extend(_semantic_problems(etype, kwargs))
    if not etype.row_level and expectation.on_violation != "warn":
        problems.append(
            f"`{etype.name}` is a table-level expectation checked by `warehouse check`, "
            f"so on_violation `{expectation.on_violation}` cannot apply to single rows; "
            "remove `on_violation` (a failed check makes `warehouse check` exit 1)"
        )
    return problems


def validate_all(expectations: Sequence[Expectation]) -> list[tuple[int, str]]:
    """`validate` for a table's list, plus names used twice: `(index, message)` pairs.

    Two expectations with the same name (`name`, or `type(columns)`) would be
    indistinguishable in quality events, quarantine rows and reports.
    """
    problems = [(i, m) for i, exp in enumerate(expectations) for m in validate(exp)]
    first: dict[str, int] = {}
    for i, exp in enumerate(expectations):
        if exp.type not in EXPECTATION_TYPES:
            continue
        eid = expectation_id(exp)
        if eid in first:
            problems.append(
                (
                    i,
                    f"expectation `{eid}` is declared twice (also expectations[{first[eid]}]); "
                    "remove one or give one a distinct `name`",
                )
            )
        else:
            first[eid] = i
    return sorted(problems, key=lambda p: p[0])


def _semantic_problems(etype: ExpectationType, kwargs: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    lo, hi = kwargs.get("min_value"), kwargs.get("max_value")
    both_numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lo, hi))
    both_strings = isinstance(lo, str) and isinstance(hi, str)
    if (both_numbers or both_strings) and lo > hi:
        problems.append(
            f"`{etype.name}`: `min_value` {_shown(lo)} is greater than `max_value` {_shown(hi)}"
        )
    regex = kwargs.get("regex")
    if isinstance(regex, str) and regex:
        try:
            re.compile(regex)
        except re.error as e:
            problems.append(f"`{etype.name}`: `regex` `{regex}` does not compile: {e}")
    for key in ("type_",):
        value = kwargs.get(key)
        if isinstance(value, str) and value and normalize_type_name(value) is None:
            problems.append(
                f"`{etype.name}`: `{key}` `{value}` is not a Spark type name; "
                f"use one of {', '.join(f'`{n}`' for n in _TYPE_EXAMPLES)}"
            )
    for value in kwargs.get("type_list") or []:
        if isinstance(value, str) and value and normalize_type_name(value) is None:
            problems.append(
                f"`{etype.name}`: `type_list` entry `{value}` is not a Spark type name; "
                f"use e.g. {', '.join(f'`{n}`' for n in _TYPE_EXAMPLES)}"
            )
    for key in ("value", "min_value", "max_value"):
        v = kwargs.get(key)
        if etype.name.startswith("expect_column_value_lengths") and isinstance(v, int) and v < 0:
            problems.append(f"`{etype.name}`: `{key}` must not be negative (got `{v}`)")
    return problems


# Spark simple type names (DataType.simpleString) and their class names, so a
# YAML author may write either `bigint` or `LongType`.
# fmt: off
_SPARK_TYPES: dict[str, str] = {
    "string": "string", "stringtype": "string", "str": "string",
    "boolean": "boolean", "booleantype": "boolean", "bool": "boolean",
    "tinyint": "tinyint", "bytetype": "tinyint", "byte": "tinyint",
    "smallint": "smallint", "shorttype": "smallint", "short": "smallint",
    "int": "int", "integer": "int", "integertype": "int",
    "bigint": "bigint", "long": "bigint", "longtype": "bigint",
    "float": "float", "floattype": "float", "real": "float",
    "double": "double", "doubletype": "double",
    "decimal": "decimal", "decimaltype": "decimal",
    "date": "date", "datetype": "date",
    "timestamp": "timestamp", "timestamptype": "timestamp",
    "timestamp_ntz": "timestamp_ntz", "timestampntztype": "timestamp_ntz",
    "binary": "binary", "binarytype": "binary",
    "array": "array", "arraytype": "array",
    "map": "map", "maptype": "map",
    "struct": "struct", "structtype": "struct",
}
# fmt: on
_TYPE_EXAMPLES = ("string", "int", "bigint", "double", "decimal", "boolean", "timestamp", "date")


def normalize_type_name(name: str) -> str | None:
    """`LongType`/`long`/`bigint` -> `bigint`; `decimal(12,2)` -> `decimal`; None if unknown."""
    base = name.strip().lower()
    base = re.sub(r"\(.*\)$", "", base).strip()
    base = re.sub(r"<.*>$", "", base).strip()
    return _SPARK_TYPES.get(base)
