"""Rows compared as multisets on the listed columns (no Spark: collected values)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from warehouse.testing.rows import difference, shown


def test_order_is_ignored_and_repeats_count() -> None:
    expected = [("a", 1), ("b", 2), ("b", 2)]
    assert difference(expected, [("b", 2), ("a", 1), ("b", 2)]) == ([], [])
    assert difference(expected, [("b", 2), ("a", 1)]) == ([("b", 2)], [])
    assert difference(expected, [("a", 1), ("b", 2), ("b", 2), ("c", 3)]) == ([], [("c", 3)])


def test_a_row_is_shown_as_json_of_its_columns() -> None:
    row = ("o1", Decimal("12.50"), dt.datetime(2024, 5, 1, 10, 0), None, ("x", 1))
    assert shown(["id", "amount", "at", "city", "nested"], row) == (
        '{"id": "o1", "amount": 12.5, "at": "2024-05-01 10:00:00", "city": null, '
        '"nested": ["x", 1]}'
    )
