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
