"""Row-level expectations on real Spark batch frames: counts and each on_violation."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, Row

from warehouse.quality.errors import ExpectationFailed, QualityError
from warehouse.quality.quarantine import QUARANTINE_SCHEMA, quarantine_from_parse_errors
from warehouse.quality.rows import RowChecks
from warehouse.spec.table import Expectation

pytestmark = pytest.mark.spark

TS = dt.datetime(2026, 1, 2, 3, 4, 5)
ORDERS_DDL = (
    "order_id string, amount int, status string, _topic string, _partition int, "
    "_offset bigint, _timestamp timestamp"
)
ORDERS = [
    ("o1", 10, "paid", "orders", 0, 100, TS),
    (None, 20, "paid", "orders", 0, 101, TS),  # null id
    ("o3", -5, "paid", "orders", 1, 7, TS),  # negative amount
    ("o4", 30, "lost", "orders", 1, 8, TS),  # bad status
    (None, -1, "paid", "orders", 1, 9, TS),  # null id and negative amount
    ("o6", None, None, "orders", 1, 10, TS),  # nulls are not violations of between/in_set
]


def assertDataFrameEqual(actual: DataFrame, expected: list[Row] | DataFrame) -> None:
    """Row-order-free equality; pyspark's own helper imports pyspark.pandas, broken on pandas 3."""
    if not isinstance(expected, DataFrame):
        expected = actual.sparkSession.createDataFrame(expected, actual.schema)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def same_types(a, b) -> bool:
    return [(f.name, f.dataType) for f in a] == [(f.name, f.dataType) for f in b]


def exps(*docs: dict) -> list[Expectation]:
    return [Expectation.model_validate(d) for d in docs]


def not_null(on: str) -> dict:
    return {"expect_column_values_to_not_be_null": {"column": "order_id"}, "on_violation": on}


def positive(on: str) -> dict:
    return {
        "expect_column_values_to_be_between": {"column": "amount", "min_value": 0},
        "on_violation": on,
    }


def status_known(on: str) -> dict:
    return {
        "expect_column_values_to_be_in_set": {"column": "status", "value_set": ["paid", "new"]},
        "on_violation": on,
    }


@pytest.fixture
def orders(spark):
    return spark.createDataFrame(ORDERS, ORDERS_DDL)


def counts(metrics: list[dict]) -> dict[str, tuple[int, int, int]]:
    return {m["expectation"]: (m["checked"], m["passed"], m["failed"]) for m in metrics}


def test_warn_keeps_every_row_and_counts_like_great_expectations(orders):
    checks = RowChecks.compile(
        exps(not_null("warn"), positive("warn"), status_known("warn")),
        orders.schema,
        table="ods_orders",
    )
    with checks.apply(orders, table="ods_orders", batch_id=4) as out:
        assert out.quarantine is None
        assertDataFrameEqual(out.keep, orders)
        assert counts(out.metrics) == {
            "expect_column_values_to_not_be_null(order_id)": (6, 4, 2),
            # the null amount of o6 is not checked
            "expect_column_values_to_be_between(amount)": (5, 3, 2),
            "expect_column_values_to_be_in_set(status)": (5, 4, 1),
        }
        assert {m["batch_id"] for m in out.metrics} == {4}
        assert {m["table"] for m in out.metrics} == {"ods_orders"}
        assert [m["success"] for m in out.metrics] == [False, False, False]
        assert (out.rows, out.kept, out.quarantined) == (6, 6, 0)


def test_drop_removes_only_the_failing_rows(orders):
    checks = RowChecks.compile(
        exps(not_null("drop"), status_known("warn")), orders.schema, table="t"
    )
    with checks.apply(orders, table="t", batch_id=0) as out:
        assert out.quarantine is None
        expected = [
            Row(**dict(zip(orders.columns, r, strict=True))) for r in ORDERS if r[0] is not None
        ]
        assertDataFrameEqual(out.keep, expected)
        assert (out.rows, out.kept, out.quarantined, out.dropped) == (6, 4, 0, 2)


def test_quarantine_moves_rows_with_failed_names_batch_id_and_coordinates(orders):
    checks = RowChecks.compile(
        exps(not_null("quarantine"), positive("quarantine"), status_known("drop")),
        orders.schema,
        table="ods_orders",
    )
    with checks.apply(orders, table="ods_orders", batch_id=12) as out:
        assert same_types(out.quarantine.schema, QUARANTINE_SCHEMA)
        nn, pos = (
            "expect_column_values_to_not_be_null(order_id)",
            "expect_column_values_to_be_between(amount)",
        )

        def q(names, partition, offset, row):
            return Row(
                reason="failed expectations: " + ", ".join(names),
                failed_expectations=names,
                batch_id=12,
                source_topic="orders",
                source_partition=partition,
                source_offset=offset,
                source_timestamp=TS,
                raw_key=None,
                raw_value=None,
                row=json.dumps(row, separators=(",", ":")),
            )

        assertDataFrameEqual(
            out.quarantine.drop("quarantined_at"),
            [
                q([nn], 0, 101, {"order_id": None, "amount": 20, "status": "paid"}),
                q([pos], 1, 7, {"order_id": "o3", "amount": -5, "status": "paid"}),
                q([nn, pos], 1, 9, {"order_id": None, "amount": -1, "status": "paid"}),
            ],
        )
        assert out.quarantine.filter("quarantined_at IS NULL").count() == 0
        # o4 failed a `drop` expectation only: neither kept nor quarantined.
        assertDataFrameEqual(out.keep.select("order_id"), [Row(order_id="o1"), Row(order_id="o6")])
        # counted in the checks' own pass, as the frames hold them
        assert (out.rows, out.kept, out.quarantined, out.dropped) == (6, 2, 3, 1)
        assert (out.keep.count(), out.quarantine.count()) == (out.kept, out.quarantined)


def test_fail_raises_naming_table_expectation_and_offending_rows(orders):
    checks = RowChecks.compile(
        exps(status_known("warn"), positive("fail")), orders.schema, table="ods_orders"
    )
    with pytest.raises(ExpectationFailed) as info:
        checks.apply(orders, table="ods_orders", batch_id=3)
    err = info.value
    assert err.table == "ods_orders"
    assert err.expectation == "expect_column_values_to_be_between(amount)"
    assert (err.failed, err.checked, err.batch_id) == (2, 5, 3)
    assert sorted(r["_offset"] for r in err.rows) == [7, 9]
    text = str(err)
    assert "Table `ods_orders`" in text and "`expect_column_values_to_be_between(amount)`" in text
    assert "'order_id': 'o3'" in text and "'amount': -5" in text
    assert orders.is_cached is False  # the batch is released when the check raises


def test_fail_tolerates_failures_within_mostly(orders):
    doc = positive("fail")
    doc["expect_column_values_to_be_between"]["mostly"] = 0.6  # 3 of 5 pass
    with RowChecks.compile(exps(doc), orders.schema).apply(orders, table="t", batch_id=0) as out:
        assert out.metrics[0]["success"] is True
        assert out.keep.count() == 6
        assert (out.rows, out.kept, out.quarantined) == (6, 6, 0)


def test_shows_at_most_five_offending_rows(spark):
    df = spark.range(20).selectExpr("id", "CAST(NULL AS string) AS name")
    checks = RowChecks.compile(
        exps({"expect_column_values_to_not_be_null": {"column": "name"}, "on_violation": "fail"}),
        df.schema,
    )
    with pytest.raises(ExpectationFailed, match="failed for 20 of 20 rows") as info:
        checks.apply(df, table="t", batch_id=1)
    assert len(info.value.rows) == 5


def test_every_row_level_type_judges_values_like_great_expectations(spark):
    df = spark.createDataFrame(
        [
            (1, "AB1", 5, 3, None),
            (2, "ab", 1, 1, "x"),
            (3, None, None, None, None),
            (4, "ABCDE", 10, 11, None),
        ],
        "id int, code string, hi int, lo int, gone string",
    )
    docs = {
        "be_null": {"expect_column_values_to_be_null": {"column": "gone"}},
        "between_strict": {
            "expect_column_values_to_be_between": {
                "column": "hi",
                "min_value": 1,
                "max_value": 10,
                "strict_min": True,
                "strict_max": True,
            }
        },
        "not_in_set": {
            "expect_column_values_to_not_be_in_set": {"column": "code", "value_set": ["ab"]}
        },
        "regex": {
            "expect_column_values_to_match_regex": {"column": "code", "regex": "^[A-Z]+\\d?$"}
        },
        "not_regex": {
            "expect_column_values_to_not_match_regex": {"column": "code", "regex": "[0-9]"}
        },
        "of_type_ok": {
            "expect_column_values_to_be_of_type": {"column": "id", "type_": "IntegerType"}
        },
        "of_type_bad": {
            "expect_column_values_to_be_of_type": {"column": "code", "type_": "bigint"}
        },
        "type_list": {
            "expect_column_values_to_be_in_type_list": {
                "column": "hi",
                "type_list": ["long", "int"],
            }
        },
        "len_between": {
            "expect_column_value_lengths_to_be_between": {
                "column": "code",
                "min_value": 3,
                "max_value": 4,
            }
        },
        "len_equal": {"expect_column_value_lengths_to_equal": {"column": "code", "value": 2}},
        "a_gt_b": {
            "expect_column_pair_values_a_to_be_greater_than_b": {"column_A": "hi", "column_B": "lo"}
        },
        "a_ge_b": {
            "expect_column_pair_values_a_to_be_greater_than_b": {
                "column_A": "hi",
                "column_B": "lo",
                "or_equal": True,
            }
        },
        "num_regex": {"expect_column_values_to_match_regex": {"column": "hi", "regex": "^\\d$"}},
    }
    expectations = [Expectation.model_validate({**d, "name": n}) for n, d in docs.items()]
    checks = RowChecks.compile(expectations, df.schema, table="t")
    with checks.apply(df, table="t", batch_id=0) as out:
        assert counts(out.metrics) == {
            "be_null": (4, 3, 1),
            "between_strict": (3, 1, 2),  # 1 and 10 are excluded by strict bounds
            "not_in_set": (3, 2, 1),
            "regex": (3, 2, 1),  # `ab` is lower-case
            "not_regex": (3, 2, 1),  # `AB1` has a digit
            "of_type_ok": (4, 4, 0),
            "of_type_bad": (3, 0, 3),  # nulls are not judged
            "type_list": (3, 3, 0),
            "len_between": (3, 1, 2),
            "len_equal": (3, 1, 2),
            "a_gt_b": (3, 1, 2),  # 1 > 1 fails, 10 > 11 fails; the null pair is not judged
            "a_ge_b": (3, 2, 1),
            "num_regex": (3, 2, 1),  # ints are judged by their text: 10 has two digits
        }


def test_compile_rejects_unknown_columns_and_duplicate_names(spark, orders):
    with pytest.raises(QualityError, match=r"`column` `nope` is not a column of the table"):
        RowChecks.compile(
            exps({"expect_column_values_to_not_be_null": {"column": "nope"}}),
            orders.schema,
            table="t",
        )
    with pytest.raises(QualityError, match="two expectations are named"):
        RowChecks.compile(exps(not_null("warn"), not_null("drop")), orders.schema)


def test_table_level_expectations_are_not_compiled(orders):
    checks = RowChecks.compile(
        exps({"expect_column_values_to_be_unique": {"column": "order_id"}}), orders.schema
    )
    assert checks.empty
    out = checks.apply(orders, table="t", batch_id=0)
    assert out.keep is orders and out.metrics == [] and out.quarantine is None


def test_parse_errors_become_quarantine_rows_with_raw_bytes(spark):
    bad = spark.createDataFrame(
        [(b"k1", b"{not json", "orders", 2, 55, TS, "malformed JSON")],
        "key binary, value binary, _topic string, _partition int, _offset bigint, "
        "_timestamp timestamp, _error string",
    )
    out = quarantine_from_parse_errors(bad, batch_id=9)
    assert same_types(out.schema, QUARANTINE_SCHEMA)
    assertDataFrameEqual(
        out.drop("quarantined_at"),
        [
            Row(
                reason="parse error: malformed JSON",
                failed_expectations=[],
                batch_id=9,
                source_topic="orders",
                source_partition=2,
                source_offset=55,
                source_timestamp=TS,
                raw_key=bytearray(b"k1"),
                raw_value=bytearray(b"{not json"),
                row=None,
            )
        ],
    )


def test_quality_events_frame_has_the_events_schema(spark, orders):
    from warehouse.quality.events import EVENTS_DDL, quality_events_frame

    checks = RowChecks.compile(exps(not_null("warn")), orders.schema, table="ods_orders")
    now = dt.datetime(2026, 1, 1, 0, 0)
    with checks.apply(orders, table="ods_orders", batch_id=2) as out:
        frame = quality_events_frame(spark, out.metrics, now=now)
    assert same_types(frame.schema, spark.createDataFrame([], EVENTS_DDL).schema)
    assertDataFrameEqual(
        frame,
        [Row(table="ods_orders", batch_id=2,
             expectation="expect_column_values_to_not_be_null(order_id)", on_violation="warn",
             checked=6, passed=4, failed=2, recorded_at=now)],
    )  # fmt: skip


@pytest.mark.parametrize(
    "docs",
    [
        [not_null("quarantine"), positive("drop"), status_known("warn")],
        [not_null("drop"), positive("quarantine"), status_known("quarantine")],
        [positive("warn")],
        [
            {
                "expect_column_values_to_be_between": {
                    "column": "amount",
                    "min_value": 0,
                    "mostly": 0.5,
                },
                "on_violation": "quarantine",
            }
        ],
    ],
)
def test_observe_in_one_pass_gives_what_apply_gives(orders, docs):
    from pyspark.sql import Observation

    checks = RowChecks.compile(exps(*docs), orders.schema, table="ods_orders")
    seen = Observation(f"checks-{len(docs)}-{docs[0]['on_violation']}")
    keep = checks.observe(orders, seen)
    kept = keep.collect()  # the one pass: the write
    with checks.apply(orders, table="ods_orders", batch_id=4) as whole:
        assertDataFrameEqual(keep, whole.keep)
        assert len(kept) == whole.keep.count()
        observed = seen.get
        metrics = checks.observed_metrics(observed, table="ods_orders", batch_id=4)
        assert metrics == whole.metrics
        quarantined = checks.quarantined(orders, batch_id=4)
        n_quarantined = 0 if whole.quarantine is None else whole.quarantine.count()
        assert observed["rows"] == orders.count()
        assert observed["quarantined"] == n_quarantined == quarantined.count()
        assert observed["removed"] == orders.count() - len(kept)
        if whole.quarantine is not None:
            cols = [c for c in QUARANTINE_SCHEMA.fieldNames() if c != "quarantined_at"]
            assertDataFrameEqual(quarantined.select(cols), whole.quarantine.select(cols))


def test_observe_refuses_checks_that_can_fail_the_batch(orders):
    from pyspark.sql import Observation

    checks = RowChecks.compile(exps(not_null("fail"), positive("quarantine")), orders.schema)
    assert checks.fail_fast
    with pytest.raises(QualityError, match="judged before the write"):
        checks.observe(orders, Observation("never"))
    assert not RowChecks.compile(exps(positive("quarantine")), orders.schema).fail_fast
