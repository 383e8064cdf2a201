"""`snapshots: {max_age: ...}`: an interval, for a table whose SQL reads other tables,
checked at load with file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse import Project, ProjectError


def _project(tmp_path: Path, snapshots: str, *, sql: str) -> Path:
    ods = tmp_path / "layers" / "ods"
    dwd = tmp_path / "layers" / "dwd"
    ods.mkdir(parents=True)
    dwd.mkdir(parents=True)
    (ods / "orders.yml").write_text(
        "table: ods_orders\nsource: {kafka: {topic: orders, format: json, schema: orders}}\n"
    )
    (ods / "users.yml").write_text(
        "table: ods_users\nsource: {kafka: {topic: users, format: upsert-json, schema: users}}\n"
        "sink: {mode: upsert, keys: [user_id]}\n"
    )
    (dwd / "orders.yml").write_text(
        f"table: dwd_orders\nsource: {{table: ods_orders}}\ntransform:\n  sql: {sql}\n{snapshots}"
    )
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "orders.ddl").write_text("order_id string, user_id string")
    (tmp_path / "schemas" / "users.ddl").write_text("user_id string, city string")
    return tmp_path


JOIN = "SELECT o.order_id, u.city FROM source o LEFT JOIN ods_users u ON o.user_id = u.user_id"


def test_a_table_reading_a_snapshot_may_keep_it_for_a_while(tmp_path: Path) -> None:
    project = Project.load(
        _project(tmp_path, "snapshots: {max_age: 30 seconds}\n", sql=JOIN), environ={}
    )
    defn = project.tables["dwd_orders"]
    assert defn.static_tables == ["ods_users"]
    assert defn.spec.snapshots is not None and defn.spec.snapshots.max_age == "30 seconds"
    assert (
        Project.load(_project(tmp_path / "b", "", sql=JOIN), environ={})
        .tables["dwd_orders"]
        .spec.snapshots
        is None
    )


@pytest.mark.parametrize("value", ["a minute", "0 seconds", "10"])
def test_a_bad_max_age_is_a_load_problem_with_file_and_field(tmp_path: Path, value: str) -> None:
    with pytest.raises(ProjectError) as info:
        Project.load(_project(tmp_path, f"snapshots: {{max_age: {value}}}\n", sql=JOIN), environ={})
    [problem] = info.value.problems
    assert problem.path == "layers/dwd/orders.yml"
    assert problem.field == "snapshots.max_age"
    assert f"`{value}`" in problem.message


def test_snapshots_without_a_table_to_keep_is_a_load_problem(tmp_path: Path) -> None:
    alone = "SELECT order_id, user_id FROM source"
    with pytest.raises(ProjectError) as info:
        Project.load(
            _project(tmp_path, "snapshots: {max_age: 30 seconds}\n", sql=alone), environ={}
        )
    [problem] = info.value.problems
    assert problem.path == "layers/dwd/orders.yml"
    assert problem.field == "snapshots.max_age"
    assert "reads no other table of the project as a snapshot" in problem.message
    assert "Remove `snapshots`" in problem.message


def _named(tmp_path: Path, catalog: str, sql: str) -> Path:
    root = _project(tmp_path, "snapshots: {max_age: 30 seconds}\n", sql=sql)
    (root / "conf").mkdir()
    (root / "conf" / "local.yml").write_text(f"catalog: {catalog}\n")
    return root


@pytest.mark.parametrize(
    ("catalog", "name", "full"),
    [
        ('{schema: "{layer}"}', "ods.ods_users", "spark_catalog.ods.ods_users"),
        ('{schema: "{layer}"}', "spark_catalog.ODS.ods_users", "spark_catalog.ods.ods_users"),
        ('{catalog: main, schema: "wh_{layer}"}', "main.wh_ods.ods_users", "main.wh_ods.ods_users"),
    ],
)
def test_sql_may_name_a_snapshot_by_its_catalog_name(
    tmp_path: Path, catalog: str, name: str, full: str
) -> None:
    """`schema.table` and `catalog.schema.table` are the project's table: a snapshot, with
    its place in the graph and its columns checked, as `ods_users` would be."""
    sql = JOIN.replace("JOIN ods_users u", f"JOIN {name} u")
    project = Project.load(_named(tmp_path, catalog, sql), environ={})
    assert project.tables["dwd_orders"].static_tables == ["ods_users"]
    assert sorted(project.graph.upstream("dwd_orders")) == ["ods_orders", "ods_users"]
    assert project.catalog_name("ods_users") == full
    assert project.quarantine_catalog_name("ods_users") == full + "__quarantine"
    with pytest.raises(ProjectError) as info:  # a column it does not have is still found
        Project.load(_named(tmp_path / "b", catalog, sql.replace("u.city", "u.town")), environ={})
    assert "`town`" in str(info.value)


def test_a_name_in_another_schema_is_not_a_project_table(tmp_path: Path) -> None:
    sql = JOIN.replace("JOIN ods_users u", "JOIN dwd.ods_users u")
    with pytest.raises(ProjectError) as info:
        Project.load(_named(tmp_path, '{schema: "{layer}"}', sql), environ={})
    assert "dwd.ods_users" in str(info.value)
