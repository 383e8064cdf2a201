"""The line a run prints per table."""

from __future__ import annotations

from dataclasses import replace

from warehouse.runtime.results import RunResult, add_results


def test_a_run_that_committed_no_version_says_so_and_not_a_dash() -> None:
    """A table already up to date (or not built) commits nothing: "version -" read as
    "no table"; the line says no new version was made."""
    idle = RunResult("ods_events", "ods", seconds=2.04)
    assert idle.line() == (
        "ods_events [ods]: 0 batch(es), 0 rows in, 0 written, 0 quarantined, no new version, 2.0s"
    )
    wrote = replace(idle, batches=1, rows_read=6, rows_written=5, quarantined=1, version=3)
    assert wrote.line() == (
        "ods_events [ods]: 1 batch(es), 6 rows in, 5 written, 1 quarantined, version 3, 2.0s"
    )


def test_rows_failing_a_warn_expectation_are_counted_in_the_line_and_over_attempts() -> None:
    """`warn` keeps the rows, so nothing else in the line would show them."""
    first = RunResult(
        "dim_users", "dwd", batches=1, rows_read=4, rows_written=4, version=1,
        warned={"expect_column_values_to_be_in_set(tier)": 1},
    )  # fmt: skip
    assert first.line() == (
        "dim_users [dwd]: 1 batch(es), 4 rows in, 4 written, 0 quarantined, "
        "1 failed expect_column_values_to_be_in_set(tier) (warn), version 1, 0.0s"
    )
    later = replace(
        first,
        warned={"expect_column_values_to_be_in_set(tier)": 2, "expect_column_values_to_not_be_null(city)": 1},
    )  # fmt: skip
    assert add_results(first, later).warned == {
        "expect_column_values_to_be_in_set(tier)": 3,
        "expect_column_values_to_not_be_null(city)": 1,
    }


def test_a_table_with_a_dead_letter_topic_counts_the_dead_letters_sent() -> None:
    """Shown for a table with a dead-letter topic, 0 included (quarantined rows that were
    not sent are worth seeing); absent from the line of a table without one."""
    plain = RunResult("ods_orders", "ods", batches=1, rows_read=6, quarantined=1, version=3)
    assert "dead letter" not in plain.line()
    dlq = replace(plain, dead_letters=0)
    assert dlq.line() == (
        "ods_orders [ods]: 1 batch(es), 6 rows in, 0 written, 1 quarantined, "
        "0 dead letters sent, version 3, 0.0s"
    )
    assert ", 1 dead letter sent," in replace(plain, dead_letters=1).line()
    assert add_results(dlq, replace(plain, dead_letters=2)).dead_letters == 2
    assert add_results(plain, plain).dead_letters is None
    assert replace(plain, dead_letters=21).to_dict()["dead_letters"] == 21
