"""`source: {table: ...}` by the table's catalog name (`catalog:` in `conf/<env>.yml`):
`schema.table` and `catalog.schema.table` are the project's table, as its own name is."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from warehouse import Project, ProjectError


def _project(tmp_path: Path, source: str, *, catalog: str | None) -> Path:
    ods = tmp_path / "layers" / "ods"
    dwd = tmp_path / "layers" / "dwd"
    ods.mkdir(parents=True)
    dwd.mkdir(parents=True)
    (ods / "orders.yml").write_text(
        "table: ods_orders\nsource: {kafka: {topic: orders, format: json, schema: orders}}\n"
    )
    (dwd / "orders.yml").write_text(
        f"table: dwd_orders\nsource: {{table: {source}}}\n"
        "transform:\n  sql: SELECT order_id, amount * 2 AS doubled FROM source\n"
    )
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "orders.ddl").write_text("order_id string, amount int")
    if catalog is not None:
        (tmp_path / "conf").mkdir()
        (tmp_path / "conf" / "local.yml").write_text(f"catalog: {catalog}\n")
    return tmp_path


@pytest.mark.parametrize(
    ("catalog", "written"),
    [
        ('{schema: "{layer}"}', "ods.ods_orders"),
        ('{schema: "{layer}"}', "SPARK_CATALOG.Ods.ods_orders"),
        ('{catalog: main, schema: "wh_{layer}"}', "main.wh_ods.ods_orders"),
        ("{schema: warehouse}", "warehouse.ods_orders"),
    ],
)
def test_a_source_may_name_its_table_by_the_catalog_name(
    tmp_path: Path, catalog: str, written: str
) -> None:
    project = Project.load(_project(tmp_path, written, catalog=catalog), environ={})
    source = project.tables["dwd_orders"].spec.source
    assert source.table == "ods_orders"
    assert sorted(project.graph.upstream("dwd_orders")) == ["ods_orders"]
    unqualified = Project.load(_project(tmp_path / "b", "ods_orders", catalog=catalog), environ={})
    assert project.tables["dwd_orders"].spec == unqualified.tables["dwd_orders"].spec


@pytest.mark.parametrize(
    ("catalog", "written"),
    [
        ('{schema: "{layer}"}', "dwd.ods_orders"),  # the table's layer is ods
        ('{schema: "{layer}"}', "other.ods.ods_orders"),  # another catalog
        (None, "ods.ods_orders"),  # no `catalog:`, no catalog names
    ],
)
def test_a_name_that_is_no_table_of_the_project_is_a_load_problem(
    tmp_path: Path, catalog: str | None, written: str
) -> None:
    with pytest.raises(ProjectError) as info:
        Project.load(_project(tmp_path, written, catalog=catalog), environ={})
    [problem] = [p for p in info.value.problems if p.path == "layers/dwd/orders.yml"]
    assert f"`{written}`" in problem.message, problem.message


def test_the_stream_join_of_the_example_by_catalog_names(tmp_path: Path) -> None:
    """The example's stream-stream join with every table it reads named `schema.table`
    (source, join stream, SQL) is the same table as the example's."""
    repo = Path(__file__).resolve().parents[3]
    for part in ("conf", "layers", "schemas"):
        shutil.copytree(repo / part, tmp_path / part)
    conf = tmp_path / "conf" / "local.yml"
    conf.write_text(conf.read_text() + '\ncatalog: {schema: "wh_{layer}"}\n')
    plain = Project.load(tmp_path, environ={})
    spec = tmp_path / "layers" / "dws" / "order_payments.yml"
    text = spec.read_text()
    named = (
        text.replace("table: dwd_orders", "table: wh_dwd.dwd_orders")
        .replace("- table: dwd_payments", "- table: spark_catalog.wh_dwd.dwd_payments")
        .replace("JOIN dwd_payments p", "JOIN wh_dwd.dwd_payments p")
    )
    assert named.count("wh_dwd.") == 3
    spec.write_text(named)
    project = Project.load(tmp_path, environ={})
    got, want = project.tables["dws_order_payments"], plain.tables["dws_order_payments"]
    assert got.spec.source == want.spec.source
    assert project.graph.upstream("dws_order_payments") == plain.graph.upstream(
        "dws_order_payments"
    )
