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
    assert "`x.y` names `x`, which is neither a table or alias" in result.problems[2]


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


RICH = Columns(
    [
        *SOURCE,
        Column("items", "array<struct<sku: string, qty: bigint>>"),
        Column("attrs", "map<string, string>"),
    ]
)

VALID_SPARK_SQL = [
    "SELECT order_id, item.sku FROM source LATERAL VIEW explode(items) t AS item",
    "SELECT order_id, attrs['k'] AS k, payload.city AS city, source.payload.city AS c2 FROM source",
    "SELECT order_id, transform(items, x -> x.sku) AS skus FROM source",
    "SELECT user_id, count(*) FILTER (WHERE amount > 1) AS n FROM source GROUP BY user_id",
    "SELECT order_id, row_number() OVER (PARTITION BY user_id ORDER BY event_time) AS rn "
    "FROM source QUALIFY rn = 1",
    "SELECT order_id, amount * 2 doubled FROM source WHERE doubled > 3",
    "SELECT user_id, sum(amount) AS total FROM source GROUP BY 1 HAVING total > 10",
    "SELECT o.order_id FROM source AS o "
    "WHERE EXISTS (SELECT 1 FROM dim_users u WHERE u.user_id = o.user_id)",
    "SELECT order_id FROM source WHERE user_id IN (SELECT user_id FROM dim_users WHERE city = 'x')",
    "SELECT order_id, t.sku FROM source, LATERAL (SELECT items[0].sku AS sku) t",
    "SELECT order_id, current_date AS d, current_timestamp AS ts FROM source",
    "SELECT * EXCEPT (amount) FROM source",
]


def test_valid_spark_sql_reports_nothing() -> None:
    for sql in VALID_SPARK_SQL:
        result = analyze_sql(sql, {"source": RICH, "dim_users": USERS})
        assert result.problems == [], sql


def test_mistakes_in_correlated_subqueries_and_ctes_are_found_once() -> None:
    schema = {"source": RICH, "dim_users": USERS}
    correlated = analyze_sql(
        "SELECT o.order_id FROM source AS o "
        "WHERE EXISTS (SELECT 1 FROM dim_users u WHERE u.user_id = o.usr_id)",
        schema,
    )
    assert len(correlated.problems) == 1 and "column `usr_id`" in correlated.problems[0]
    cte = analyze_sql(
        "WITH a AS (SELECT user_id, city FROM dim_users), "
        "b AS (SELECT o.*, a.city FROM source o JOIN a ON o.user_id = a.user_id) "
        "SELECT b.city, b.amount, b.cityy FROM b",
        schema,
    )
    assert len(cte.problems) == 1
    assert "column `cityy` is not a column of `b`" in cte.problems[0]
    assert "`amount`, `event_time`" in cte.problems[0]


def test_spark_result_types_sqlglot_leaves_generic() -> None:
    cols = Columns(
        [
            Column("t", "timestamp"),
            Column("n", "int"),
            Column("s", "string"),
            Column("m", "map<string, bigint>"),
            Column("a", "array<string>"),
            Column("f", "double"),
            Column("d", "decimal(12,2)"),
        ]
    )
    expected = {
        "date_trunc('hour', t)": "timestamp",
        "year(t)": "int",
        "hour(t)": "int",
        "collect_set(n)": "array<int>",
        "m['k']": "bigint",
        "a[0]": "string",
        "xxhash64(s)": "bigint",
        "window(t, '1 minute').start": "timestamp",
        "window(t, '1 minute')": "struct<start: timestamp, end: timestamp>",
        "f + d": "double",
        "d - 1": "decimal(12,2)",
    }
    assert {e: expression_type(e, cols)[0] for e in expected} == expected
