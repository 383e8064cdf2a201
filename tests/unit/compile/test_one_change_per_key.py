"""Which upsert tables' batches hold one row per sink key, decided when they compile (no
Spark): an aggregate or a dedupe by some of the keys, or SQL that ends in a plain
GROUP BY of key columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse import Project
from warehouse.compile.sql import grouped_output, sql_text
from warehouse.compile.targets import Targets, one_change_per_key

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def example() -> Project:
    return Project.load(REPO)


def test_the_examples_aggregates_say_so_and_nothing_else_does(example: Project) -> None:
    said = {
        name
        for name in example.tables
        if Targets.of_table(example, name, engine="python").one_change_per_key
    }
    # dim_products is an upsert of CDC records: a batch may hold several of one key.
    assert said == {
        "dws_active_users_5m",  # a hopping window's aggregate, keyed by its start
        "dws_city_gmv_1m",  # a window per city, keyed by start and city
        "ads_city_leaderboard",  # SQL: GROUP BY city
        "ads_conversion",
    }


def _with(defn, **changes):
    spec = defn.spec.model_copy(update=changes)
    return defn.model_copy(update={"spec": spec})


def test_an_aggregate_or_dedupe_counts_only_when_its_groups_are_keys(example: Project) -> None:
    gmv = example.tables["dws_city_gmv_1m"]  # window per city, keys window_start, city
    sink = gmv.spec.sink
    assert one_change_per_key(gmv, None)
    by_end = _with(gmv, sink=sink.model_copy(update={"keys": ["window_end", "city"]}))
    assert one_change_per_key(by_end, None)
    by_city = _with(gmv, sink=sink.model_copy(update={"keys": ["city"]}))
    assert not one_change_per_key(by_city, None)  # one row per window and city
    more_groups = gmv.spec.aggregate.model_copy(update={"group_by": ["city", "user_id"]})
    assert not one_change_per_key(_with(gmv, aggregate=more_groups), None)
    dwd = example.tables["dwd_orders"]  # an append: never
    assert not one_change_per_key(dwd, sql_text(example, dwd))


@pytest.mark.parametrize(
    ("sql", "grouped"),
    [
        ("SELECT city, sum(x) AS gmv FROM source WHERE a > 0 GROUP BY city", {"city"}),
        ("SELECT o.city AS c, count(*) n FROM source o JOIN t ON o.k = t.k GROUP BY o.city", {"c"}),
        (
            "SELECT city, day, sum(x) FROM source GROUP BY city, day HAVING sum(x) > 0",
            {"city", "day"},
        ),
        (
            "SELECT o.city, u.city AS home, sum(x) FROM source o JOIN u GROUP BY o.city, u.city",
            {"city", "home"},
        ),
        # Not a plain grouping of selected columns, or rows made after it:
        ("SELECT a FROM source", None),
        ("SELECT sum(x) FROM source GROUP BY city", None),
        ("SELECT * FROM source GROUP BY city", None),
        ("SELECT upper(city) c, sum(x) FROM source GROUP BY upper(city)", None),
        ("SELECT city, sum(x) FROM source GROUP BY ROLLUP(city)", None),
        ("SELECT city, sum(x) FROM source GROUP BY city WITH CUBE", None),
        ("SELECT city, explode(collect_list(x)) FROM source GROUP BY city", None),
        ("SELECT city, posexplode(collect_list(x)) FROM source GROUP BY city", None),
        ("SELECT city, y FROM source LATERAL VIEW explode(a) t AS y GROUP BY city, y", None),
        ("SELECT city, sum(x) FROM source GROUP BY city UNION ALL SELECT city, 1 FROM t", None),
    ],
)
def test_sql_that_ends_in_a_plain_grouping(sql: str, grouped: set[str] | None) -> None:
    assert grouped_output(sql, table="t") == (None if grouped is None else frozenset(grouped))
