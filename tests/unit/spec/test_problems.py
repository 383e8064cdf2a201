"""One fixture project per kind of mistake: each problem names its file, field and fix."""

from __future__ import annotations

import pytest

from tests.unit.spec.conftest import assert_problems, load_problems

# (project, env) -> every expected problem as (file, field, words the message must contain).
# The count is exact: a check that reports something false fails here too.
CASES: dict[tuple[str, str], list[tuple[str, str, tuple[str, ...]]]] = {
    ("yaml_syntax", "local"): [
        ("layers/ods/events.yml", "", ("YAML syntax error", "line 4")),
    ],
    ("unknown_key", "local"): [
        ("layers/ods/events.yml", "source.kafka.topci", ("unknown key `topci`", "`topic`?")),
        ("layers/ods/events.yml", "sink.partition", ("unknown key `partition`", "`partition_by`")),
    ],
    ("wrong_type", "local"): [
        ("layers/ods/events.yml", "source.kafka.max_offsets_per_trigger", ("`lots`", "integer")),
        ("layers/ods/events.yml", "source.kafka.starting_offsets", ("`yesterday`", "'earliest'")),
        ("layers/ods/events.yml", "sink.keys", ("expected a list", "`key`")),
    ],
    ("missing_field", "local"): [
        ("layers/ods/events.yml", "source", ("required field `source`",)),
        ("layers/dwd/events.yml", "sink.sequence_by", ("required field `sequence_by`",)),
    ],
    ("duplicate_table", "local"): [
        ("layers/ods/events.yml", "table", ("`ods_events`", "layers/ods/events_copy.yml")),
        ("layers/ods/events_copy.yml", "table", ("`ods_events`", "layers/ods/events.yml")),
    ],
    # A table that does not load is reported once, in its own file: the tables reading it
    # (as a stream, in SQL, kept as a snapshot) are not told that it does not exist.
    ("broken_upstream", "local"): [
        ("layers/dwd/orders.yml", "sinc", ("unknown key `sinc`", "`sink`?")),
    ],
    ("unknown_upstream", "local"): [
        ("layers/dwd/orders.yml", "source.table", ("`ods_ordrs`", "not a table", "`ods_orders`?")),
    ],
    ("cycle", "local"): [
        (
            "layers/dwd/a.yml",
            "source.table",
            (
                "cycle",
                "`dwd_a` (layers/dwd/a.yml) → `dwd_b`",
                "→ `dwd_c` (layers/dwd/c.yml) → `dwd_a`",
            ),
        ),
    ],
    ("layer_order", "local"): [
        (
            "layers/dwd/events.yml",
            "transform.sql",
            ("`ads_report`", "later layer `ads`", "ods → dwd → dws → ads"),
        ),
    ],
    ("sql_parse", "local"): [
        ("layers/dwd/events.yml", "transform.sql", ("does not parse", "line 1", "`WHERE`")),
        ("layers/dwd/more.sql", "", ("2 statements", "one SELECT")),
    ],
    ("sql_columns", "local"): [
        ("layers/dwd/orders.yml", "transform.sql", ("table `currencies`", "`ods_orders`")),
        ("layers/dwd/orders.yml", "transform.sql", ("column `order_id`", "`id`, `amount`, `ts`")),
        ("layers/dwd/orders.yml", "transform.sql", ("column `currency`", "`id`, `amount`, `ts`")),
    ],
    ("unknown_schema", "local"): [
        (
            "layers/ods/orders.yml",
            "source.kafka.schema",
            ("schema `order`", "schemas/order.json", "`orders`?"),
        ),
    ],
    ("invalid_schema", "local"): [
        ("schemas/orders.json", "properties.id.type", ("`strng`", "not supported")),
        ("schemas/users.ddl", "", ("`VARCHR(20)`", "not a Spark type")),
        ("schemas/broken.json", "", ("not valid JSON", "line 1")),
    ],
    ("kafka_stateful", "local"): [
        ("layers/ods/clicks.yml", "watermark", ("reads Kafka directly", "ODS", "DWD")),
        ("layers/ods/clicks.yml", "dedupe", ("reads Kafka directly", "`dedupe`")),
        ("layers/dwd/clicks.yml", "source", ("`join_streams`", "table sources only", "DWD")),
    ],
    ("columns_not_found", "local"): [
        ("layers/ods/orders.yml", "sink.partition_by[0]", ("`event_date`", "`id`, `city`")),
        ("layers/dwd/orders.yml", "watermark.column", ("`event_time`", "(`id`, `ts`)")),
        (
            "layers/dwd/orders.yml",
            "dedupe.keys[0]",
            (
                "Table `dwd_orders`: dedupe key `order_id` is not a column of the transform output "
                "(`id`, `ts`). Add it to the SELECT or change `dedupe.keys`.",
            ),
        ),
        ("layers/dws/city.yml", "aggregate.group_by[0]", ("`town`", "`city`")),
        (
            "layers/dws/mismatch.yml",
            "aggregate.window.column",
            ("`_timestamp`", "`ts`", "same event-time column"),
        ),
        ("layers/dws/city.yml", "aggregate.measures.gmv", ("`amont`", "`amount`")),
        ("layers/dws/city.yml", "sink.sequence_by", ("`version`", "aggregate output")),
        (
            "layers/dws/city.yml",
            "expectations[0].expect_column_values_to_not_be_null.column",
            ("`cty`",),
        ),
    ],
    ("python_transform", "local"): [
        ("layers/dwd/no_module.yml", "transform.python", ("`layers.dwd.nowhere`", "not found")),
        ("layers/dwd/no_function.yml", "transform.python", ("has no `biuld`", "`build`")),
        ("layers/dwd/broken_import.yml", "transform.python", ("not_a_real_dependency_xyz",)),
        ("layers/dwd/broken.py", "", ("importing `layers.dwd.broken` failed",)),
    ],
    ("bad_expectation", "local"): [
        (
            "layers/ods/events.yml",
            "expectations[0].expect_column_values_to_be_purple",
            ("unknown expectation type",),
        ),
        (
            "layers/ods/events.yml",
            "expectations[1].expect_column_values_to_be_between",
            ("`min_vale`", "`min_value`"),
        ),
        (
            "layers/ods/events.yml",
            "expectations[1].expect_column_values_to_be_between",
            ("at least one of",),
        ),
    ],
    ("expectation_problems", "local"): [
        (
            "layers/ods/events.yml",
            "expectations[1].expect_column_values_to_not_be_null",
            ("`expect_column_values_to_not_be_null(id)` is declared twice", "expectations[0]"),
        ),
        (
            "layers/ods/events.yml",
            "expectations[3].expect_column_values_to_not_be_null",
            ("`positive` is declared twice", "expectations[2]", "distinct `name`"),
        ),
        (
            "layers/ods/events.yml",
            "expectations[4].expect_column_values_to_not_be_null.column",
            ("`amout` is not a column of the source", "`id`, `amount`, `_topic`", "`amount`?"),
        ),
        (
            "layers/ods/clicks.yml",
            "expectations[0].on_violation",
            ("`explode` is not allowed", "'quarantine'"),
        ),
        (
            "layers/dwd/events.yml",
            "expectations[0].expect_column_values_to_be_between.column",
            ("`amount` is not a column of the transform output", "(`id`, `doubled`)"),
        ),
    ],
    ("cdc_without_schema", "local"): [
        (
            "layers/dwd/users.yml",
            "source.kafka.schema",
            (
                "Table `dim_users`: format `debezium-json` needs the columns",
                "`schema: NAME`",
                "`connect_schema: true`",
                "`products`",
            ),
        ),
        (
            "layers/dwd/prices.yml",
            "source.kafka.schema",
            (
                "Table `dim_prices`: format `upsert-json` needs the columns",
                "`schema: NAME`",
                "`connect_schema: true`",
            ),
        ),
        (
            "layers/dwd/both.yml",
            "source.kafka.connect_schema",
            ("either `schema: products` or `connect_schema: true`",),
        ),
        (
            "layers/dwd/clicks.yml",
            "source.kafka.connect_schema",
            ("Table `ods_clicks`", "formats `debezium-json` and `upsert-json`, not `raw`"),
        ),
        (
            "layers/dwd/many.yml",
            "source.kafka.connect_schema",
            ("instead of `pattern`",),
        ),
    ],
    ("publish_conflict", "local"): [
        ("layers/ads/one.yml", "publish.kafka.topic", ("`mv.events`", "`ads_two`")),
        ("layers/ads/two.yml", "publish.kafka.topic", ("`mv.events`", "`ads_one`")),
    ],
    ("dead_letters", "local"): [
        ("layers/ods/orders.yml", "quarantine.kafka.topic", ("`dlq.orders`", "`ods_payments`")),
        ("layers/ods/payments.yml", "quarantine.kafka.topic", ("`dlq.orders`", "`ods_orders`")),
        ("layers/ods/clicks.yml", "quarantine.kafka.topic", ("`clicks`", "reads", "`dlq.")),
        ("layers/ods/typo.yml", "quarantine.kafka.topik", ("unknown key `topik`", "`topic`?")),
        ("layers/ods/typo.yml", "quarantine.kafka.topic", ("required field `topic`",)),
        ("layers/ods/bad_name.yml", "quarantine.kafka.topic", ("`dlq/../etc`", "topic name")),
        ("layers/ods/bad_name.yml", "quarantine.kafka.partitions", ("greater than 0",)),
        ("layers/dwd/orders.yml", "quarantine.kafka", ("`ods_orders`", "not Kafka")),
    ],
    ("bad_conf", "local"): [
        ("conf/local.yml", "kafka.bootstrap", ("`BROKERS_FOR_BAD_CONF`", "environment variable")),
        ("conf/local.yml", "kafka.securty", ("unknown key `securty`", "`security`?")),
        ("conf/local.yml", "engines.kafka", ("`turbo`", "'auto'")),
    ],
    ("bad_conf", "staging"): [
        ("conf/staging.yml", "kafka.securty", ("unknown key `securty`",)),
        ("conf/staging.yml", "engines.kafka", ("`turbo`",)),
        ("conf/staging.yml", "spark.cores", ("unknown key `cores`", "`master`")),
    ],
    ("change_feed_names", "local"): [
        (
            "layers/dws/kept.yml",
            "transform.sql",
            ("column `_change_type`", "change data feed", "`_change_type AS change_type`"),
        ),
        (
            "layers/dws/whole.yml",
            "source",
            (
                "columns `_change_type`, `_commit_version`, `_commit_timestamp`",
                "as changes without a transform",
                "`transform.sql`",
            ),
        ),
    ],
    ("static_cycle", "local"): [
        ("layers/dwd/a.yml", "transform.sql", ("cycle", "`dwd_a` (layers/dwd/a.yml) → `dwd_b`")),
        ("layers/dwd/c.sql", "", ("column `key` appears twice",)),
    ],
    ("layout", "local"): [
        ("layers/staging/", "", ("`staging` is not a layer", "`ods`, `dwd`, `dws`, `ads`")),
        ("layers/loose.yml", "", ("inside a layer folder",)),
        ("layers/ods/empty.yml", "", ("the file is empty",)),
        ("layers/ods/reserved.yml", "table", ("table name `source` is reserved",)),
        ("layers/ods/list.yml", "", ("a mapping", "not a list")),
        ("layers/ods/twice.yml", "table", ("key `table` appears twice", "lines 1 and 3")),
        ("layers/dwd/joined.yml", "transform.sql_file", ("`missing.sql` not found",)),
        (
            "layers/dwd/streams.yml",
            "source.join_streams[0].watermark.column",
            ("join watermark column `event_time` is not a column of `ods_ok`", "`key`, `value`"),
        ),
    ],
    ("shop", "prod"): [
        ("conf/prod.yml", "", ("no config for env `prod`", "`local`")),
    ],
}


@pytest.mark.parametrize(("project", "env"), list(CASES), ids=[f"{p}-{e}" for p, e in CASES])
def test_each_problem_is_reported_with_file_field_and_fix(project: str, env: str) -> None:
    error = load_problems(project, env)
    assert_problems(error, CASES[(project, env)])
    assert error.exit_code == 2


def test_str_is_one_line_per_problem_in_file_field_message_form() -> None:
    error = load_problems("unknown_upstream")
    assert str(error).splitlines() == [
        "layers/dwd/orders.yml: source.table: Table `dwd_orders` reads `ods_ordrs`, which is not "
        "a table of the project. Did you mean `ods_orders`? Tables: `dwd_orders`, `ods_orders`."
    ]
    assert error.problems[0].table == "dwd_orders"


def test_several_problems_in_several_files_are_all_reported_at_once() -> None:
    error = load_problems("many_problems")
    located = {(p.path, p.field) for p in error.problems}
    assert located == {
        ("conf/local.yml", "kafka.extra_key"),
        ("layers/ods/events.yml", "dedupe"),
        ("layers/dwd/events.yml", "source.table"),
        ("layers/dwd/events.yml", "transform.sql"),
        ("layers/dws/events.yml", "sink.keys"),
        ("layers/ads/events.yml", "sink.keys[0]"),
    }
    assert len(str(error).splitlines()) == len(error.problems) == 6


def test_yaml_problems_carry_the_line() -> None:
    error = load_problems("unknown_key")
    lines = {p.field: p.line for p in error.problems}
    assert lines == {"source.kafka.topci": 3, "sink.partition": 4}


def test_unset_variable_with_a_value_in_the_environment_is_fine() -> None:
    error = load_problems("bad_conf", environ={"BROKERS_FOR_BAD_CONF": "h:9092"})
    assert "kafka.bootstrap" not in {p.field for p in error.problems}
    assert {p.field for p in error.problems} == {"kafka.securty", "engines.kafka"}
