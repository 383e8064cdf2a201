"""SQL transforms checked and typed with sqlglot, without a JVM."""

from __future__ import annotations

from warehouse.spec.schemas import Column, Columns
from warehouse.spec.sqlcheck import analyze_sql, expression_type

SOURCE = Columns(
    [
        Column("order_id", "string"),
        Column("user_id", "string"),
        Column("amount", "double"),
        Column("event_time", "timestamp"),
        Column("payload", "struct<city: string>"),
    ]
)
USERS = Columns([Column("user_id", "string"), Column("city", "string")])


def test_output_names_and_types() -> None:
    result = analyze_sql(
        "WITH t AS (SELECT * FROM source) "
        "SELECT t.order_id, CAST(t.amount AS DECIMAL(12,2)) AS amount, u.city, "
        "payload.city AS payload_city, to_date(event_time) AS day, count(*) OVER () AS n "
        "FROM t LEFT JOIN dim_users u ON t.user_id = u.user_id ORDER BY amount",
        {"source": SOURCE, "dim_users": USERS},
    )
    assert result.problems == []
    assert result.tables == ["source", "dim_users"]
    assert [(c.name, c.type) for c in result.columns or []] == [
        ("order_id", "string"),
        ("amount", "decimal(12,2)"),
        ("city", "string"),
        ("payload_city", "string"),
        ("day", "date"),
        ("n", "bigint"),
    ]


def test_every_unknown_column_is_reported_with_the_available_ones() -> None:
    result = analyze_sql(
        "SELECT o.ordr_id, citty, x.y FROM source o JOIN dim_users u USING (user_id)",
        {"source": SOURCE, "dim_users": USERS},
    )
    assert result.columns is None
    assert len(result.problems) == 3
    assert "column `ordr_id` is not a column of `source` (as `o`)" in result.problems[0]
    assert "`order_id`, `user_id`, `amount`" in result.problems[0]
    assert "column `citty` is not a column of any table" in result.problems[1]
    assert "`x.y` names `x`, which is not a table or alias" in result.problems[2]


def test_opaque_tables_are_not_checked_and_make_the_output_opaque() -> None:
    result = analyze_sql("SELECT anything FROM source", {"source": Columns(opaque=True)})
    assert result.problems == [] and result.columns is None


def test_statements_other_than_one_select_are_rejected() -> None:
    assert "not a SELECT but `INSERT`" in analyze_sql("INSERT INTO t SELECT 1", {}).problems[0]
    assert "2 statements" in analyze_sql("SELECT 1; SELECT 2", {}).problems[0]
    bad = analyze_sql("SELECT a FROM source WHERE", {"source": SOURCE}).problems[0]
    assert "does not parse at line 1" in bad and "<class" not in bad


def test_measure_types_follow_spark() -> None:
    cols = Columns([Column("n", "int"), Column("d", "decimal(12,2)"), Column("f", "double")])
    assert expression_type("sum(n)", cols) == ("bigint", [])
    assert expression_type("sum(d)", cols) == ("decimal(22,2)", [])
    assert expression_type("avg(n)", cols) == ("double", [])
    assert expression_type("count(*)", cols) == ("bigint", [])
    assert expression_type("max(f)", cols) == ("double", [])
    kind, problems = expression_type("sum(nope)", cols)
    assert kind is None and "`nope`" in problems[0]
