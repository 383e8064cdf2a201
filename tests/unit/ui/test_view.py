"""What the pipeline page shows, as data (`warehouse.ui.PipelineView`) and as its
banner: no Spark, no browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.run_state import RunStates
from warehouse.runtime.writer import BatchStats
from warehouse.ui import PipelineView
from warehouse.ui.app import banner, details_panel, elements, table_rows
from warehouse.ui.view import dead_letters_progress


def test_a_project_never_run_then_running_then_failed(tmp_path: Path) -> None:
    project = Project.load(write_project(tmp_path / "p", bootstrap="127.0.0.1:1"), environ={})
    view = PipelineView(project)
    graph = view.graph()
    assert [(n["table"], n["layer"], n["x"]) for n in graph["nodes"]] == [
        ("ods_orders", "ods", 0),
        ("dwd_orders", "dwd", 260),
    ]
    assert graph["edges"] == [
        {"upstream": "ods_orders", "downstream": "dwd_orders", "kind": "source"}
    ]
    snap = view.snapshot()
    assert {n: r["state"] for n, r in snap["tables"].items()} == {
        "ods_orders": "never run",
        "dwd_orders": "never run",
    }
    assert banner(snap["run"]) == ("Never run: no process has run these tables yet.", "never-run")
    labels = {e["data"].get("id"): e["data"].get("label") for e in elements(view, snap)}
    assert labels["layer:ods"] == "ODS" and labels["ods_orders"] == "ods_orders\nnever run · - rows"
    assert snap["tables"]["ods_orders"]["quarantine_rows"] is None

    states = RunStates(project, mode="continuous")
    states.started("ods_orders")
    states.batch("ods_orders", 0, BatchStats(rows_in=3, rows_written=2, quarantined=1))
    snap = view.snapshot()
    ods = snap["tables"]["ods_orders"]
    assert ods["state"] == "running"
    assert (ods["last_batch"]["rows_in"], ods["last_batch"]["rows_written"]) == (3, 2)
    line, kind = banner(snap["run"])
    assert kind == "running" and line.startswith("Running: pid ")

    states.failed("ods_orders", "column `x` not found")
    snap = view.snapshot()
    assert (snap["tables"]["ods_orders"]["state"], snap["tables"]["ods_orders"]["reason"]) == (
        "failed",
        "column `x` not found",
    )
    line, kind = banner(snap["run"])
    assert kind == "failed" and line.startswith("Run failed: no process runs these tables now")
    details = view.details("ods_orders")
    assert details["definition"][0]["file"] == "layers/ods/orders.yml"
    assert "table: ods_orders" in details["definition"][0]["text"]
    assert details["quarantine"] == {"rows": 0, "reasons": []}


def texts(component: Any) -> list[str]:
    """Every text of a Dash component tree, in order (what the browser shows)."""
    if isinstance(component, str | int | float):
        return [str(component)]
    if isinstance(component, list | tuple):
        return [t for c in component for t in texts(c)]
    return texts(getattr(component, "children", None) or [])


def by_id(component: Any, wanted: str) -> Any:
    if isinstance(component, list | tuple):
        return next((f for c in component if (f := by_id(c, wanted)) is not None), None)
    if getattr(component, "id", None) == wanted:
        return component
    children = getattr(component, "children", None)
    return None if children is None or isinstance(children, str) else by_id(children, wanted)


def test_dead_letters_in_words() -> None:
    def words(newest: int | None, sent: int | None, behind: int | None) -> tuple[str, str]:
        d = dead_letters_progress(
            {
                "topic": "dlq.orders",
                "quarantine_version": newest,
                "sent_version": sent,
                "versions_behind": behind,
            }  # fmt: skip
        )
        assert d is not None and d["topic"] == "dlq.orders"
        return d["progress"], d["text"]

    assert words(3, 3, 0) == ("up to date", "sent through version 3 of quarantine version 3 "
                              "(up to date)")  # fmt: skip
    assert words(3, 1, 2) == ("2 versions behind", "sent through version 1 of quarantine "
                              "version 3 (2 versions behind)")  # fmt: skip
    assert words(0, None, 1) == ("1 version behind", "none sent of quarantine version 0 "
                                 "(1 version behind)")  # fmt: skip
    assert words(2, None, None) == ("unknown", "quarantine version 2, sent version unknown "
                                    "(no broker answered)")  # fmt: skip
    assert words(None, None, 0) == ("none yet", "none yet (no quarantine table)")
    assert dead_letters_progress(None) is None


def test_a_table_with_dead_letters_shows_its_topic_and_how_far_they_are_sent(
    tmp_path: Path,
) -> None:
    root = write_project(tmp_path / "p", bootstrap="127.0.0.1:1")
    orders = root / "layers" / "ods" / "orders.yml"
    orders.write_text(orders.read_text() + "quarantine: {kafka: {topic: dlq.orders}}\n")
    project = Project.load(root, environ={})
    view = PipelineView(project)
    try:
        states = RunStates(project, mode="continuous")
        states.started("ods_orders")
        states.batch("ods_orders", 0, BatchStats(rows_in=3, rows_written=2, quarantined=1,
                                                 dead_letters=1))  # fmt: skip
        snap = view.snapshot()
    finally:
        view.close()
    ods, dwd = snap["tables"]["ods_orders"], snap["tables"]["dwd_orders"]
    # No broker answers and no quarantine table yet.
    assert ods["dead_letters"] == {
        "topic": "dlq.orders",
        "quarantine_version": None,
        "sent_version": None,
        "versions_behind": None,
        "progress": "none yet",
        "text": "none yet (no quarantine table)",
    }
    assert dwd["dead_letters"] is None

    head, body = table_rows(snap)
    columns = texts(head)
    shown = {texts(r)[0]: dict(zip(columns, texts(r), strict=True)) for r in body.children}
    assert shown["ods_orders"]["dead letters"] == "none yet"
    assert shown["dwd_orders"]["dead letters"] == "-"

    # A quarantine table whose sent position the broker did not give.
    ods["dead_letters"] = dead_letters_progress(
        {
            "topic": "dlq.orders",
            "quarantine_version": 2,
            "sent_version": None,
            "versions_behind": None,
        }  # fmt: skip
    )
    head, body = table_rows(snap)
    shown = {texts(r)[0]: dict(zip(columns, texts(r), strict=True)) for r in body.children}
    assert shown["ods_orders"]["dead letters"] == "unknown"
    panel = details_panel(view, "ods_orders", ods)
    assert "".join(texts(by_id(panel, "details-dead-letters"))) == (
        "dead letters to dlq.orders: quarantine version 2, sent version unknown "
        "(no broker answered)"
    )
    batches = by_id(panel, "details-batches")
    assert texts(batches.children[0])[-1] == "dead letters sent"
    assert texts(batches.children[1])[-2:] == ["1", "1"]  # quarantined, dead letters sent

    # A table without a dead-letter topic shows neither the line nor the column.
    dwd_panel = details_panel(view, "dwd_orders", dwd)
    assert by_id(dwd_panel, "details-dead-letters") is None
    assert "dead letters sent" not in texts(by_id(dwd_panel, "details-batches"))
