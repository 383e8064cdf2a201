"""Valid projects load: tables in dependency order, columns, paths, graph, Python transforms."""

from __future__ import annotations

import pytest

from tests.unit.spec.conftest import PROJECTS, REPO_ROOT
from warehouse import Project, ProjectError, WarehouseError
from warehouse.spec.errors import UnknownTableError


@pytest.fixture(scope="module")
def shop() -> Project:
    return Project.load(PROJECTS / "shop", environ={})


def test_the_bundled_example_loads() -> None:
    project = Project.load(REPO_ROOT, environ={})
    assert {"ods_orders", "dwd_orders"} <= set(project.tables)
    position = {name: i for i, name in enumerate(project.tables)}
    for name, definition in project.tables.items():
        assert definition.path.startswith(f"layers/{definition.layer}/"), name
        for upstream in project.graph.upstream(name):
            assert position[upstream] < position[name], (upstream, name)
    assert project.graph.upstream("dwd_orders")[0] == "ods_orders"
    assert "order_id" in project.schemas["dwd_orders"].names
    assert project.tables["ods_orders"].payload_ddl is not None


def test_cluster_env_of_the_example_reads_secrets_from_the_environment() -> None:
    project = Project.load(REPO_ROOT, env="cluster", environ={"KAFKA_PASSWORD": "pw-123"})
    security = project.config.kafka.security
    assert security.password is not None and security.password.get_secret_value() == "pw-123"
    assert security.username is None  # `${KAFKA_USERNAME:-}` unset means not set
    assert "pw-123" not in str(project.config) and "pw-123" not in repr(project.config)


def test_tables_come_in_dependency_order_with_layer_then_name_ties(shop: Project) -> None:
    assert list(shop.tables) == [
        "ods_orders",
        "ods_payments",
        "dim_users",
        "dwd_orders",
        "dws_city_gmv_1m",
        "dws_user_sessions",
        "ads_city_gmv",
        "ads_user_stats",
    ]
    assert shop.graph.order == list(shop.tables)


def test_stream_static_reference_found_in_sql_is_a_static_edge(shop: Project) -> None:
    assert shop.tables["dwd_orders"].static_tables == ["dim_users"]
    assert shop.graph.upstream("dwd_orders") == ["ods_orders", "dim_users"]
    assert shop.graph.upstream("dwd_orders", static=True) == ["dim_users"]
    assert shop.graph.downstream("dim_users") == ["dwd_orders"]
    assert shop.graph.layers("dws") == ["dws_city_gmv_1m", "dws_user_sessions"]
    assert shop.graph.stream_readers("dwd_orders") == [
        "dws_city_gmv_1m",
        "dws_user_sessions",
        "ads_city_gmv",
        "ads_user_stats",
    ]
    assert shop.graph.stream_readers("dws_city_gmv_1m") == ["ads_city_gmv"]
    assert shop.graph.stream_readers("dim_users") == []  # a snapshot of it only
    assert shop.graph.ancestors("ads_city_gmv") == [
        "ods_orders",
        "dim_users",
        "dwd_orders",
        "dws_city_gmv_1m",
    ]


def _cols(project: Project, table: str) -> list[tuple[str, str]]:
    return [(c.name, c.type) for c in project.schemas[table]]


def test_output_columns_of_kafka_tables(shop: Project) -> None:
    coords = [
        ("_topic", "string"),
        ("_partition", "int"),
        ("_offset", "bigint"),
        ("_timestamp", "timestamp"),
    ]
    assert _cols(shop, "ods_orders") == [
        ("order_id", "string"),
        ("user_id", "string"),
        ("amount", "double"),
        ("items", "array<struct<sku: string, qty: bigint>>"),
        ("event_time", "timestamp"),
        *coords,
    ]
    assert [c.nullable for c in shop.schemas["ods_orders"]][:5] == [False, True, True, True, False]
    assert _cols(shop, "ods_payments") == [("key", "binary"), ("value", "binary"), *coords]
    # debezium row image + `_source_ts_ms`, `_source_lsn`; the SCD2 sink drops `_op` and
    # adds validity columns
    assert _cols(shop, "dim_users") == [
        ("user_id", "string"),
        ("name", "string"),
        ("city", "string"),
        ("signup_date", "date"),
        ("_source_ts_ms", "bigint"),
        ("_source_lsn", "bigint"),
        *coords,
        ("valid_from", "timestamp"),
        ("valid_to", "timestamp"),
        ("is_current", "boolean"),
    ]
    assert shop.tables["ods_orders"].payload_ddl == (
        "`order_id` string NOT NULL, `user_id` string, `amount` double, "
        "`items` array<struct<sku: string, qty: bigint>>, `event_time` timestamp NOT NULL"
    )  # NOT NULL: JSON Schema `required`, which the parse enforces
    assert shop.payload_schemas["users"].names == ["user_id", "name", "city", "signup_date"]


def test_output_columns_of_sql_and_aggregate_tables(shop: Project) -> None:
    assert _cols(shop, "dwd_orders") == [
        ("order_id", "string"),
        ("user_id", "string"),
        ("city", "string"),
        ("amount", "decimal(12,2)"),
        ("event_time", "timestamp"),
    ]
    assert _cols(shop, "dws_city_gmv_1m") == [
        ("window_start", "timestamp"),
        ("window_end", "timestamp"),
        ("city", "string"),
        ("gmv", "decimal(22,2)"),
        ("orders", "bigint"),
    ]
    # read: changes adds the change-feed columns the SQL uses (`_commit_version`)
    assert _cols(shop, "ads_city_gmv") == [
        ("city", "string"),
        ("gmv", "decimal(32,2)"),
        ("version", "bigint"),
    ]


def test_python_transform_makes_columns_opaque_and_downstream_unchecked(shop: Project) -> None:
    assert shop.schemas["dws_user_sessions"].opaque
    assert shop.schemas["ads_user_stats"].opaque  # its SQL names columns nobody can check
    assert shop.tables["ads_user_stats"].sql_path == "sql/user_stats.sql"
    build = shop.transform_callable("dws_user_sessions")
    assert build("frame", None) == "frame"


def test_paths_are_deterministic_under_the_root(shop: Project, tmp_path) -> None:
    root = PROJECTS / "shop" / ".warehouse"
    assert shop.root == str(root)
    assert shop.table_path("dwd_orders") == str(root / "tables" / "dwd_orders")
    assert shop.checkpoint_path("dwd_orders") == str(root / "checkpoints" / "dwd_orders")
    assert shop.quarantine_path("ods_orders") == str(root / "tables" / "ods_orders__quarantine")
    moved = Project.load(PROJECTS / "shop", environ={}, warehouse_root=str(tmp_path))
    assert moved.table_path("x") == str(tmp_path / "tables" / "x")


def test_unknown_table_names_the_known_ones(shop: Project) -> None:
    with pytest.raises(UnknownTableError) as info:
        shop.table("dwd_ordrs")
    assert isinstance(info.value, WarehouseError) and info.value.exit_code == 2
    assert "`dwd_ordrs`" in str(info.value) and "`dwd_orders`" in str(info.value)


def test_a_folder_without_layers_is_not_a_project(tmp_path) -> None:
    with pytest.raises(ProjectError) as info:
        Project.load(tmp_path, environ={})
    assert info.value.problems[0].path == "layers/"
    assert "no `layers/` folder" in info.value.problems[0].message
