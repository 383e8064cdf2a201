"""YAML and Python definitions produce the same spec; a dumped spec loads back equal."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.unit.spec.conftest import PROJECTS
from warehouse import Project
from warehouse.spec import TableSpec


def test_python_defined_table_equals_its_yaml_twin() -> None:
    project = Project.load(PROJECTS / "python_defined", environ={})
    defined = project.tables["dwd_orders"]
    assert defined.path == "layers/dwd/tables.py" and defined.layer == "dwd"
    twin = yaml.safe_load((PROJECTS / "python_defined" / "twin" / "dwd_orders.yml").read_text())
    assert defined.spec == TableSpec.model_validate(twin)
    # the Python table takes part in the graph and column checks like any other
    assert list(project.tables) == ["ods_orders", "dwd_orders", "dws_totals"]
    assert project.schemas["dws_totals"].names == ["order_id", "amount", "change_type"]


def test_python_defined_table_with_a_mistake_is_reported_in_its_module(tmp_path: Path) -> None:
    shutil.copytree(PROJECTS / "python_defined", tmp_path / "p")
    module = tmp_path / "p" / "layers" / "dwd" / "tables.py"
    module.write_text(
        module.read_text().replace('Dedupe(keys=["order_id"])', 'Dedupe(keys=["id"])')
    )
    from warehouse import ProjectError

    with pytest.raises(ProjectError) as info:
        Project.load(tmp_path / "p", environ={})
    [problem] = info.value.problems
    assert (problem.path, problem.field) == ("layers/dwd/tables.py", "dedupe.keys[0]")
    assert "dedupe key `id`" in problem.message


@pytest.mark.parametrize("name", ["shop", "python_defined"])
def test_dumped_specs_load_back_equal(name: str, tmp_path: Path) -> None:
    original = Project.load(PROJECTS / name, environ={})
    copy = tmp_path / name
    shutil.copytree(PROJECTS / name, copy, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    shutil.copytree(
        PROJECTS / name / "layers",
        copy / "layers",
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.yml", "tables.py"),
    )
    for definition in original.tables.values():
        target = copy / definition.path
        if target.suffix == ".py":  # a Python definition becomes a YAML file
            target = target.with_name(f"{definition.name}.yml")
        target.write_text(yaml.safe_dump(definition.spec.to_yaml(), sort_keys=False))
    reloaded = Project.load(copy, environ={})
    assert list(reloaded.tables) == list(original.tables)
    for table, definition in original.tables.items():
        assert reloaded.tables[table].spec == definition.spec
        assert reloaded.tables[table].sql == definition.sql
        assert list(reloaded.schemas[table]) == list(original.schemas[table])


def test_python_defined_sql_file_is_relative_to_the_module(tmp_path: Path) -> None:
    shutil.copytree(PROJECTS / "python_defined", tmp_path / "p")
    dwd = tmp_path / "p" / "layers" / "dwd"
    module = dwd / "tables.py"
    module.write_text(
        module.read_text().replace(
            'Transform(sql="SELECT order_id, amount, ts FROM source")',
            'Transform(sql_file="sql/orders.sql")',
        )
    )
    (dwd / "sql").mkdir()
    (dwd / "sql" / "orders.sql").write_text("SELECT order_id, ts, amount * 2 AS amount FROM source")
    loaded = Project.load(tmp_path / "p", environ={})
    definition = loaded.tables["dwd_orders"]
    assert definition.sql_path == "layers/dwd/sql/orders.sql"
    assert loaded.schemas["dwd_orders"].names == ["order_id", "ts", "amount"]
