"""Row-level expectations as Spark predicates: `(applies, passes)` per expectation."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DecimalType,
    StringType,
    StructField,
    StructType,
)

from warehouse.quality.errors import QualityError
from warehouse.spec.expectations import EXPECTATION_TYPES, normalize_type_name
from warehouse.spec.table import Expectation


def columns_by_name(
    columns: StructType | Sequence[str] | Sequence[StructField],
) -> dict[str, DataType | None]:
    if isinstance(columns, StructType):
        return {f.name: f.dataType for f in columns.fields}
    out: dict[str, DataType | None] = {}
    for c in columns:
        if isinstance(c, StructField):
            out[c.name] = c.dataType
        else:
            out[str(c)] = None
    return out


def _text(column: Column, dtype: DataType | None) -> Column:
    """Regex and length checks work on strings; other types are judged by their text."""
    if dtype is None or isinstance(dtype, StringType | BinaryType):
        return column
    return column.cast("string")


def _type_matches(dtype: DataType | None, wanted: Sequence[str], *, where: str) -> bool:
    if dtype is None:
        raise QualityError(
            f"{where}: the column types are needed to check a type; compile the checks "
            "with the batch schema (a StructType), not column names"
        )
    actual = normalize_type_name(dtype.simpleString())
    if isinstance(dtype, DecimalType):
        actual = "decimal"
    return actual in {normalize_type_name(w) for w in wanted}


def predicate(  # noqa: C901  # one flat branch per row-level expectation type
    exp: Expectation, cols: dict[str, DataType | None], *, where: str
) -> tuple[Column, Column]:
    """(applies, passes) for one expectation, with the column names checked."""
    kw = exp.kwargs
    etype = EXPECTATION_TYPES[exp.type]
    for arg in etype.columns_args:
        name = kw.get(arg)
        if name not in cols:
            known = ", ".join(f"`{c}`" for c in cols)
            raise QualityError(
                f"{where}: `{arg}` `{name}` is not a column of the table ({known}). "
                "Fix the expectation's column name or add the column to the table."
            )
    if exp.type == "expect_column_pair_values_a_to_be_greater_than_b":
        a, b = F.col(kw["column_A"]), F.col(kw["column_B"])
        return a.isNotNull() & b.isNotNull(), (a >= b) if kw.get("or_equal") else (a > b)
    name = kw["column"]
    c = F.col(name)
    dtype = cols[name]
    t = exp.type
    if t == "expect_column_values_to_not_be_null":
        return F.lit(True), c.isNotNull()
    if t == "expect_column_values_to_be_null":
        return F.lit(True), c.isNull()
    applies = c.isNotNull()
    if t in ("expect_column_values_to_be_between", "expect_column_value_lengths_to_be_between"):
        v = F.length(_text(c, dtype)) if "lengths" in t else c
        ok = F.lit(True)
        if kw.get("min_value") is not None:
            lo = F.lit(kw["min_value"])
            ok = ok & ((v > lo) if kw.get("strict_min") else (v >= lo))
        if kw.get("max_value") is not None:
            hi = F.lit(kw["max_value"])
            ok = ok & ((v < hi) if kw.get("strict_max") else (v <= hi))
        return applies, ok
    if t == "expect_column_values_to_be_in_set":
        return applies, c.isin(list(kw["value_set"]))
    if t == "expect_column_values_to_not_be_in_set":
        return applies, ~c.isin(list(kw["value_set"]))
    if t == "expect_column_values_to_match_regex":
        return applies, _text(c, dtype).rlike(kw["regex"])
    if t == "expect_column_values_to_not_match_regex":
        return applies, ~_text(c, dtype).rlike(kw["regex"])
    if t == "expect_column_values_to_be_of_type":
        return applies, F.lit(_type_matches(dtype, [kw["type_"]], where=where))
    if t == "expect_column_values_to_be_in_type_list":
        return applies, F.lit(_type_matches(dtype, kw["type_list"], where=where))
    if t == "expect_column_value_lengths_to_equal":
        return applies, F.length(_text(c, dtype)) == F.lit(kw["value"])
    raise QualityError(f"{where}: `{t}` is registered as row-level but has no Spark predicate")
