"""`warehouse plan` output on a two-layer fixture project (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.runtime.projects import write_dws_project, write_project
from warehouse import Project
from warehouse.compile.errors import SelectionError
from warehouse.compile.plan import build_plan, render, select_tables


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project.load(write_project(tmp_path / "proj", topic="shop.orders"))


def test_plan_is_in_dependency_order_with_paths_modes_and_operators(project: Project) -> None:
    plans = build_plan(project)
    assert [p.name for p in plans] == ["ods_orders", "dwd_orders"]
    ods, dwd = plans
    root = Path(project.root)
    assert (ods.source_kind, ods.topics, ods.upstreams) == ("kafka", ["shop.orders"], [])
    assert ods.table_path == str(root / "tables" / "ods_orders")
    assert ods.checkpoint_path == str(root / "checkpoints" / "ods_orders")
    assert ods.quarantine_path == str(root / "tables" / "ods_orders__quarantine")
    assert ods.expectations == ["expect_column_values_to_not_be_null (quarantine)"]
    assert (dwd.source_kind, dwd.upstreams, dwd.transform) == ("table", ["ods_orders"], "sql")
    assert dwd.operators == [
        "watermark event_time - 1 hour",
        "dedupe [order_id] within watermark",
    ]
    assert (dwd.sink_mode, dwd.output_mode) == ("append", "append")


def test_json_plan_round_trips_every_field(project: Project) -> None:
    data = json.loads(render(build_plan(project), "json"))
    assert [t["name"] for t in data["tables"]] == ["ods_orders", "dwd_orders"]
    dwd = data["tables"][1]
    assert dwd["checkpoint_path"].endswith("/checkpoints/dwd_orders")
    assert dwd["layer"] == "dwd" and dwd["file"] == "layers/dwd/orders.yml"
    assert set(dwd) >= {"source", "sink_mode", "keys", "output_mode", "trigger", "publish"}
    assert (dwd["cluster"], dwd["publish_cluster"]) == (None, None)  # the default cluster


def test_text_plan_lists_tables_in_order(project: Project) -> None:
    text = render(build_plan(project), "text")
    assert text.index("1. ods_orders") < text.index("2. dwd_orders")
    assert "kafka `shop.orders` as json (orders) from earliest" in text
    assert f"checkpoint:  {Path(project.root) / 'checkpoints' / 'dwd_orders'}" in text


def test_a_plan_says_how_a_table_reads_its_snapshots(tmp_path: Path) -> None:
    root = write_dws_project(tmp_path / "proj", topic="shop.orders")
    exact = render(build_plan(Project.load(root), tables=["dws_city_1m"]), "text")
    assert "snapshots:   dim_users (the newest version at each batch)" in exact
    spec = root / "layers" / "dws" / "city_1m.yml"
    spec.write_text(spec.read_text() + "snapshots: {max_age: 10 seconds}\n")
    [kept] = build_plan(Project.load(root), tables=["dws_city_1m"])
    assert kept.snapshot_max_age == "10 seconds"
    assert "snapshots:   dim_users (kept in Spark's cache, at most 10 seconds old)" in render(
        [kept], "text"
    )
    assert json.loads(render([kept], "json"))["tables"][0]["snapshot_max_age"] == "10 seconds"


def test_mermaid_and_dot_have_the_topic_and_table_edges(project: Project) -> None:
    mermaid = render(build_plan(project), "mermaid").splitlines()
    assert mermaid[0] == "flowchart LR"
    assert '  k_shop_orders[("shop.orders")] --> t_ods_orders' in mermaid
    assert "  t_ods_orders --> t_dwd_orders" in mermaid
    dot = render(build_plan(project), "dot")
    assert dot.startswith("digraph warehouse {") and dot.rstrip().endswith("}")
    assert '"kafka:shop.orders" -> "ods_orders";' in dot
    assert '"ods_orders" -> "dwd_orders";' in dot


def test_layer_and_table_selection(project: Project) -> None:
    assert select_tables(project, layer="dwd") == ["dwd_orders"]
    assert select_tables(project, layer="all") == ["ods_orders", "dwd_orders"]
    assert select_tables(project, tables=["dwd_orders", "ods_orders"]) == [
        "ods_orders",
        "dwd_orders",
    ]
    assert [p.name for p in build_plan(project, layer="ods")] == ["ods_orders"]
    with pytest.raises(SelectionError, match="Unknown table `nope`"):
        select_tables(project, tables=["nope"])


def test_a_kafka_json_append_is_the_only_table_whose_records_may_pass_by_the_jvm(
    tmp_path: Path,
) -> None:
    """What `warehouse run --once` asks before its session starts, to launch a JVM that
    compiles with C1 alone (docs/decisions/0052): the ODS table may take the Arrow landing
    path, unless the project parses with Spark; the DWD table's SQL runs in the JVM, and a
    Kafka table upserted or transformed goes through Spark's plans too."""
    from warehouse.compile.strategy import may_land_in_arrow

    root = write_project(tmp_path / "proj", topic="shop.orders")
    project = Project.load(root)
    ods, dwd = project.tables["ods_orders"], project.tables["dwd_orders"]
    assert may_land_in_arrow(ods, "auto")
    assert not may_land_in_arrow(ods, "spark")
    assert not may_land_in_arrow(dwd, "auto")
    root = write_project(tmp_path / "ods", topic="shop.orders", dwd=False)
    yml = root / "layers" / "ods" / "orders.yml"
    original = yml.read_text()
    for changed in (
        original.replace(
            "{mode: append}", "{mode: upsert, keys: [order_id], sequence_by: _offset}"
        ),
        original + "transform: {sql: SELECT * FROM source WHERE amount > 0}\n",
    ):
        assert changed != original
        yml.write_text(changed)
        assert not may_land_in_arrow(Project.load(root).tables["ods_orders"], "auto"), changed
