"""`warehouse status` of a table with a dead-letter topic: the topic and how far its dead
letters are sent, in the text (no broker, no Spark; the figures from a real broker are
asserted in tests/integration/quality/test_arrow_checks.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.status import render_status, status


def _line(**dead_letters: Any) -> str:
    row = {
        "table": "ods_orders",
        "layer": "ods",
        "version": 4,
        "rows": 10,
        "last_batch": 4,
        "lag": None,
        "quarantine_rows": 3,
        "exists": False,
        "dead_letters": {"topic": "dlq.orders", **dead_letters},
    }
    lines = render_status([row]).splitlines()
    return next(x for x in lines if "dead letters" in x)


def test_the_text_says_how_far_the_dead_letters_are_sent() -> None:
    head = "ods_orders: dead letters to dlq.orders: "
    assert _line(quarantine_version=3, sent_version=3, versions_behind=0) == (
        head + "sent through version 3 of quarantine version 3 (up to date)"
    )
    assert _line(quarantine_version=3, sent_version=1, versions_behind=2) == (
        head + "sent through version 1 of quarantine version 3 (2 versions behind)"
    )
    assert _line(quarantine_version=0, sent_version=None, versions_behind=1) == (
        head + "none sent of quarantine version 0 (1 version behind)"
    )
    assert _line(quarantine_version=2, sent_version=None, versions_behind=None) == (
        head + "quarantine version 2, sent version unknown (no broker answered)"
    )
    assert _line(quarantine_version=None, sent_version=None, versions_behind=0) == (
        head + "none yet (no quarantine table)"
    )


def test_a_table_without_a_broker_shows_its_topic_and_no_position(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", bootstrap="127.0.0.1:1")
    orders = root / "layers" / "ods" / "orders.yml"
    orders.write_text(orders.read_text() + "quarantine: {kafka: {topic: dlq.orders}}\n")
    rows = {r["table"]: r for r in status(Project.load(root), bootstrap="127.0.0.1:1")}
    assert rows["ods_orders"]["dead_letters"] == {
        "topic": "dlq.orders",
        "quarantine_version": None,
        "sent_version": None,
        "versions_behind": None,
    }
    assert "dead_letters" not in rows["dwd_orders"]
