"""The table graph: order, ties, edges, cycles (pure, no files)."""

from __future__ import annotations

from warehouse.spec import TableDefinition, TableSource, TableSpec, TopicSource
from warehouse.spec.graph import build_graph


def table(
    name: str,
    layer: str,
    upstream: str | None = None,
    *,
    joins: tuple[str, ...] = (),
    static: tuple[str, ...] = (),
) -> TableDefinition:
    source: TopicSource | TableSource
    if upstream is None:
        source = TopicSource.model_validate({"kafka": {"topic": name, "format": "raw"}})
    else:
        source = TableSource.model_validate(
            {"table": upstream, "join_streams": [{"table": j} for j in joins]}
        )
    return TableDefinition(
        spec=TableSpec(table=name, source=source),
        layer=layer,  # type: ignore[arg-type]
        path=f"layers/{layer}/{name}.yml",
        static_tables=list(static),
    )


def test_order_is_topological_then_layer_then_name() -> None:
    tables = [
        table("dwd_a", "dwd", "dwd_z"),  # same layer, but reads dwd_z: after it
        table("dwd_z", "dwd", "ods_b"),
        table("ods_b", "ods"),
        table("ods_a", "ods"),
        table("ads_x", "ads", "ods_a"),
        table("dws_y", "dws", "dwd_a", static=("ads_x",)),
    ]
    graph = build_graph(tables)
    assert graph.order == ["ods_a", "ods_b", "dwd_z", "dwd_a", "ads_x", "dws_y"]
    assert graph.cycles == [] and graph.missing == []
    # same input in another order: same plan
    assert build_graph(list(reversed(tables))).order == graph.order


def test_edges_name_their_kind_and_static_flag() -> None:
    graph = build_graph(
        [
            table("ods_a", "ods"),
            table("ods_b", "ods"),
            table("dim_c", "dwd", "ods_b"),
            table("dwd_d", "dwd", "ods_a", joins=("ods_b",), static=("dim_c",)),
        ]
    )
    assert [(e.upstream, e.kind, e.static) for e in graph.edges if e.downstream == "dwd_d"] == [
        ("ods_a", "source", False),
        ("ods_b", "join", False),
        ("dim_c", "static", True),
    ]
    assert graph.upstream("dwd_d", static=False) == ["ods_a", "ods_b"]
    assert graph.downstream("ods_b") == ["dim_c", "dwd_d"]
    assert graph.layers("dwd") == ["dim_c", "dwd_d"]
    assert graph.layers("all") == graph.order
    assert graph.to_dict()["edges"][-1] == {
        "upstream": "dim_c",
        "downstream": "dwd_d",
        "kind": "static",
    }


def test_missing_upstreams_are_kept_aside() -> None:
    graph = build_graph([table("dwd_a", "dwd", "ods_nowhere")])
    assert graph.order == ["dwd_a"]
    assert [(e.upstream, e.downstream) for e in graph.missing] == [("ods_nowhere", "dwd_a")]


def test_cycles_are_returned_as_closed_paths() -> None:
    graph = build_graph(
        [
            table("ods_a", "ods"),
            table("dwd_b", "dwd", "dwd_d"),
            table("dwd_c", "dwd", "dwd_b"),
            table("dwd_d", "dwd", "dwd_c"),
            table("dws_e", "dws", "dws_e"),  # reads itself
            table("dws_f", "dws", "ods_a"),
        ]
    )
    assert graph.cycles == [["dwd_b", "dwd_c", "dwd_d", "dwd_b"], ["dws_e", "dws_e"]]
    # every table is still listed, the acyclic ones first
    assert graph.order == ["ods_a", "dws_f", "dwd_b", "dwd_c", "dwd_d", "dws_e"]


def test_a_static_reference_can_close_a_cycle() -> None:
    graph = build_graph(
        [
            table("ods_a", "ods"),
            table("dwd_b", "dwd", "ods_a", static=("dwd_c",)),
            table("dwd_c", "dwd", "dwd_b"),
        ]
    )
    assert graph.cycles == [["dwd_b", "dwd_c", "dwd_b"]]
