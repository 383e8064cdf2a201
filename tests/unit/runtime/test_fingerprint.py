"""What a change of a table needs: the fingerprint parts compared (no Spark, no broker).

Each test loads the small two-layer project (`ods_orders` from Kafka, `dwd_orders` a
deduplicating SQL table over it), takes a table's fingerprint, edits the project as a
user would and classifies the change."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.compile.fingerprint import Classified, classify, fingerprint, propagate

DWD = Path("layers/dwd/orders.yml")
ODS = Path("layers/ods/orders.yml")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_project(tmp_path / "proj", bootstrap="127.0.0.1:9")


def _edit(root: Path, file: Path, old: str, new: str) -> None:
    path = root / file
    text = path.read_text()
    assert old in text, (old, text)
    path.write_text(text.replace(old, new))


def _change(root: Path, table: str, file: Path, old: str, new: str, **ids: str) -> Classified:
    before = fingerprint(Project.load(root), table, upstream_ids=ids or None)
    _edit(root, file, old, new)
    project = Project.load(root)
    stateful = table == "dwd_orders" and "dedupe" in (root / DWD).read_text()
    return classify(
        before, fingerprint(project, table, upstream_ids=ids or None), stateful=stateful
    )


def test_an_unchanged_table_and_one_never_recorded(root: Path) -> None:
    project = Project.load(root)
    for name in ("ods_orders", "dwd_orders"):
        now = fingerprint(project, name)
        assert classify(now, fingerprint(Project.load(root), name), stateful=True).status == (
            "unchanged"
        )
        assert classify(None, now, stateful=False) == Classified("unrecorded")


def test_a_stateless_querys_filter_and_a_new_column_are_picked_up_by_a_restart(root: Path) -> None:
    _edit(root, DWD, "dedupe: {keys: [order_id]}\n", "")  # a stateless dwd_orders
    found = _change(root, "dwd_orders", DWD, "WHERE amount >= 0", "WHERE amount > 0")
    assert found == Classified("restart", ["transform changed (a stateless query)"])
    found = _change(root, "dwd_orders", DWD, "event_time\n", "event_time, user_id AS buyer\n")
    assert found == Classified(
        "restart", ["transform changed (a stateless query)", "new column `buyer`"]
    )
    found = _change(root, "ods_orders", ODS, "on_violation: quarantine", "on_violation: drop")
    assert found == Classified("restart", ["checks changed: its expectations"])


def test_state_keys_sink_mode_and_a_column_type_need_a_full_refresh(root: Path) -> None:
    found = _change(root, "dwd_orders", DWD, "keys: [order_id]", "keys: [order_id, user_id]")
    assert found.status == "full_refresh"
    assert found.reasons == [
        "state changed: its stateful operators (watermark, dedupe, aggregate), whose state "
        "the checkpoint keeps"
    ]
    # The filter of a query that keeps state: the state may no longer fit the new query.
    found = _change(root, "dwd_orders", DWD, "WHERE amount >= 0", "WHERE amount > 0")
    assert found == Classified(
        "full_refresh", ["transform changed, and the query keeps state the new one may not fit"]
    )
    found = _change(
        root,
        "ods_orders",
        ODS,
        "sink: {mode: append}",
        "sink: {mode: upsert, keys: [order_id], sequence_by: _offset}",
    )
    assert found.status == "full_refresh" and found.reasons[0].startswith("sink changed")
    _edit(root, DWD, "dedupe: {keys: [order_id, user_id]}\n", "")
    found = _change(root, "dwd_orders", DWD, "AS DECIMAL(12,2)", "AS DOUBLE")
    assert found == Classified(
        "full_refresh",
        [
            "column `amount` changed type from `decimal(12,2)` to `double` (a Delta table "
            "keeps a column's type)"
        ],
    )


def test_an_input_table_rebuilt_needs_a_full_refresh(root: Path) -> None:
    project = Project.load(root)
    before = fingerprint(project, "dwd_orders", upstream_ids={"ods_orders": "a"})
    after = fingerprint(project, "dwd_orders", upstream_ids={"ods_orders": "b"})
    assert classify(before, after, stateful=True) == Classified(
        "full_refresh",
        [
            "its input table `ods_orders` was rebuilt since it last read it (its position is "
            "in the old one)"
        ],
    )


def test_a_full_refresh_carries_to_the_tables_reading_it_as_a_stream(root: Path) -> None:
    project = Project.load(root)
    own = {"ods_orders": Classified("full_refresh", ["sink changed"])}
    changes = propagate(
        project,
        {**own, "dwd_orders": Classified("unchanged")},
        existing={"ods_orders", "dwd_orders"},
    )
    assert changes["ods_orders"].followers == ["dwd_orders"]
    assert changes["dwd_orders"].status == "full_refresh"
    assert changes["dwd_orders"].follows == ["ods_orders"]
    assert changes["dwd_orders"].reasons == ["follows the full refresh of `ods_orders`"]
    assert changes["ods_orders"].line() == (
        "changed, needs a full refresh (sink changed), with `dwd_orders`"
    )
    # A table never run is built from its inputs anyway.
    changes = propagate(project, {**own, "dwd_orders": Classified("new")}, existing={"ods_orders"})
    assert changes["dwd_orders"].status == "new" and changes["ods_orders"].followers == []


def test_a_full_refresh_resets_the_tables_named_and_their_stream_readers(root: Path) -> None:
    from warehouse.runtime.refresh import Selection, refresh_selection

    project = Project.load(root)
    both = ["ods_orders", "dwd_orders"]
    assert refresh_selection(project, full_refresh=["ods_orders"]) == Selection(both, both)
    assert refresh_selection(project, full_refresh=["dwd_orders"]).reset == ["dwd_orders"]
    assert refresh_selection(project, full_refresh=["dwd_orders"]).names == ["dwd_orders"]
    # `--layer`/`--table` select more to run; `--full-refresh-all` resets what they select.
    assert refresh_selection(project, layer="all", full_refresh=["dwd_orders"]).names == both
    assert refresh_selection(project, layer="ods", full_refresh_all=True).reset == both
    assert refresh_selection(project, tables=["dwd_orders"]) == Selection(["dwd_orders"], [])


def test_a_table_moved_to_another_kafka_cluster_needs_a_full_refresh(root: Path) -> None:
    conf = root / "conf" / "local.yml"
    conf.write_text(
        conf.read_text().replace(
            "engines:", '  clusters: {eu: {bootstrap: "eu-1:9092"}}\nengines:', 1
        )
    )
    topic = "topic: orders,"
    # `cluster: default` written out is the table as it was.
    found = _change(root, "ods_orders", ODS, topic, "topic: orders, cluster: default,")
    assert found == Classified("unchanged")
    found = _change(root, "ods_orders", ODS, "cluster: default,", "cluster: eu,")
    assert found.status == "full_refresh"
    assert found.reasons == ["source changed: the source its checkpoint's position is in"]
