"""Great-expectations suites built from a table's declared expectations."""

from __future__ import annotations


def gx_class_name(type_name: str) -> str:
    """`expect_column_values_to_not_be_null` -> `ExpectColumnValuesToNotBeNull`."""
    special = {"a": "A", "b": "B"}
    return "".join(special.get(p, p.capitalize()) for p in type_name.split("_"))
