"""The expectation registry: what the loader rejects at project load, and why."""

from __future__ import annotations

import subprocess
import sys

import pytest

from warehouse.spec import expectations as registry
from warehouse.spec.expectations import expectation_id, interval_seconds, validate
from warehouse.spec.table import Expectation


def exp(doc: dict) -> Expectation:
    return Expectation.model_validate(doc)


def test_importing_the_registry_loads_neither_spark_nor_great_expectations():
    code = (
        "import sys, warehouse.spec.expectations, warehouse.quality;"
        "bad=[m for m in sys.modules if m.split('.')[0] in ('pyspark','great_expectations')];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize(
    "doc",
    [
        {
            "expect_column_values_to_not_be_null": {"column": "order_id"},
            "on_violation": "quarantine",
        },
        {"expect_column_values_to_be_null": {"column": "deleted_at", "mostly": 0.9}},
        {"expect_column_values_to_be_between": {"column": "amount", "min_value": 0}},
        {
            "expect_column_values_to_be_between": {
                "column": "d",
                "min_value": "2024-01-01",
                "max_value": "2025-01-01",
                "strict_max": True,
            }
        },
        {"expect_column_values_to_be_in_set": {"column": "s", "value_set": ["a", "b"]}},
        {"expect_column_values_to_not_be_in_set": {"column": "s", "value_set": [1, 2]}},
        {"expect_column_values_to_match_regex": {"column": "s", "regex": "^[A-Z]+$"}},
        {"expect_column_values_to_not_match_regex": {"column": "s", "regex": "test"}},
        {"expect_column_values_to_be_of_type": {"column": "s", "type_": "LongType"}},
        {
            "expect_column_values_to_be_in_type_list": {
                "column": "s",
                "type_list": ["int", "bigint"],
            }
        },
        {"expect_column_value_lengths_to_be_between": {"column": "s", "max_value": 10}},
        {
            "expect_column_value_lengths_to_equal": {"column": "s", "value": 3},
            "on_violation": "drop",
        },
        {
            "expect_column_pair_values_a_to_be_greater_than_b": {
                "column_A": "end",
                "column_B": "start",
                "or_equal": True,
            }
        },
        {"expect_column_values_to_be_unique": {"column": "order_id"}},
        {"expect_compound_columns_to_be_unique": {"column_list": ["a", "b"]}},
        {"expect_table_row_count_to_be_between": {"min_value": 1}},
        {"expect_column_max_to_be_between": {"column": "amount", "max_value": 1000}},
        {"expect_column_values_to_be_fresh": {"column": "event_time", "max_age": "1 hour"}},
    ],
)
def test_valid_expectations_have_no_problems(doc):
    assert validate(exp(doc)) == []


def test_unknown_type_suggests_the_closest_known_names():
    problems = validate(exp({"expect_column_values_to_not_be_nul": {"column": "a"}}))
    assert len(problems) == 1
    assert "unknown expectation type `expect_column_values_to_not_be_nul`" in problems[0]
    assert "`expect_column_values_to_not_be_null`" in problems[0]


def test_unknown_type_far_from_everything_points_to_the_docs():
    problems = validate(exp({"expect_the_moon": {}}))
    assert problems == [
        "unknown expectation type `expect_the_moon`; see docs/quality.md for the supported types"
    ]


def test_missing_unknown_and_wrong_typed_arguments_are_each_reported():
    problems = validate(
        exp({"expect_column_values_to_be_in_set": {"colum": "a", "value_set": "x"}})
    )
    assert any("has no argument `colum`; did you mean `column`?" in p for p in problems)
    assert any("needs the argument `column`" in p for p in problems)
    assert any("argument `value_set` is `'x'`; expected a non-empty list" in p for p in problems)
    assert len(problems) == 3


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ({"expect_column_values_to_be_between": {"column": "a"}}, "at least one of `min_value`"),
        (
            {"expect_column_values_to_be_between": {"column": "a", "min_value": 5, "max_value": 1}},
            "`min_value` 5 is greater than `max_value` 1",
        ),
        (
            {"expect_column_values_to_be_between": {"column": "a", "min_value": True}},
            "argument `min_value` is `True`",
        ),
        (
            {"expect_column_values_to_not_be_null": {"column": "a", "mostly": 1.5}},
            "expected a number in (0, 1]",
        ),
        (
            {"expect_column_values_to_match_regex": {"column": "a", "regex": "("}},
            "does not compile",
        ),
        (
            {"expect_column_values_to_be_of_type": {"column": "a", "type_": "varchar2"}},
            "`varchar2` is not a Spark type name",
        ),
        (
            {"expect_column_value_lengths_to_equal": {"column": "a", "value": "3"}},
            "expected an integer",
        ),
        (
            {"expect_column_values_to_be_fresh": {"column": "t", "max_age": "soon"}},
            "an interval such as `1 hour`",
        ),
        ({"expect_table_row_count_to_be_between": {"min_value": 1.5}}, "expected an integer"),
    ],
)
def test_bad_arguments_name_the_argument_and_what_was_expected(doc, fragment):
    problems = validate(exp(doc))
    assert any(fragment in p for p in problems), problems


def test_table_level_types_only_accept_warn():
    problems = validate(
        exp({"expect_column_values_to_be_unique": {"column": "id"}, "on_violation": "quarantine"})
    )
    assert problems == [
        "`expect_column_values_to_be_unique` is a table-level expectation checked by "
        "`warehouse check`, so on_violation `quarantine` cannot apply to single rows; "
        "remove `on_violation` (a failed check makes `warehouse check` exit 1)"
    ]


def test_levels_partition_the_registry():
    assert registry.ROW_LEVEL.isdisjoint(registry.TABLE_LEVEL)
    assert registry.ROW_LEVEL | registry.TABLE_LEVEL == set(registry.EXPECTATION_TYPES)
    assert "expect_column_values_to_not_be_null" in registry.ROW_LEVEL
    assert "expect_column_values_to_be_unique" in registry.TABLE_LEVEL


def test_expectation_id_uses_the_name_or_the_type_and_columns():
    assert expectation_id(exp({"expect_column_values_to_not_be_null": {"column": "a"}})) == (
        "expect_column_values_to_not_be_null(a)"
    )
    assert (
        expectation_id(exp({"expect_compound_columns_to_be_unique": {"column_list": ["a", "b"]}}))
        == "expect_compound_columns_to_be_unique(a, b)"
    )
    assert (
        expectation_id(
            exp({"expect_column_values_to_not_be_null": {"column": "a"}, "name": "id_present"})
        )
        == "id_present"
    )


def test_interval_seconds():
    assert interval_seconds("1 hour") == 3600
    assert interval_seconds("30 minutes") == 1800
    assert interval_seconds("2 days") == 172800
    with pytest.raises(ValueError, match="`soon` is not an interval"):
        interval_seconds("soon")


def test_every_registered_type_is_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "quality.md").read_text()
    missing = [t for t in registry.EXPECTATION_TYPES if f"| `{t}` |" not in doc]
    assert missing == []


def test_validate_all_reports_names_used_twice_with_their_index():
    from warehouse.spec.expectations import validate_all

    problems = validate_all(
        [
            exp({"expect_column_values_to_not_be_null": {"column": "a"}}),
            exp({"expect_column_values_to_be_in_set": {"column": "a"}}),
            exp({"expect_column_values_to_not_be_null": {"column": "a"}, "on_violation": "drop"}),
            exp({"expect_column_values_to_not_be_null": {"column": "b"}, "name": "x"}),
            exp({"expect_column_values_to_be_unique": {"column": "b"}, "name": "x"}),
        ]
    )
    assert problems == [
        (1, "`expect_column_values_to_be_in_set` needs the argument `value_set`"),
        (
            2,
            "expectation `expect_column_values_to_not_be_null(a)` is declared twice (also "
            "expectations[0]); remove one or give one a distinct `name`",
        ),
        (
            4,
            "expectation `x` is declared twice (also expectations[3]); remove one or give one "
            "a distinct `name`",
        ),
    ]
