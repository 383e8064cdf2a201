"""The change-aware plan and the full refresh, in-process on the shared session, on each
engine: what `warehouse plan` says of each change (new, unchanged, a restart, a full
refresh with the tables that follow), a run refused over a table that needs a full
refresh, `--full-refresh` rebuilding a table and its reader from their inputs, `--refresh`
running only the tables named, and a full refresh refused where the topic no longer holds
the table's first records, until `--allow-data-loss`.

Real broker process, real Spark, real Delta tables; the CLI called in-process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from streams.kafka.admin import produce
from tests.integration.runtime.helpers import order, orders_project, rows
from warehouse import Project
from warehouse.cli.main import main
from warehouse.runtime.errors import DefinitionChangedError

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

KEYS = ["order_id", "user_id"]


def _edit(root: Path, file: str, old: str, new: str) -> Project:
    path = root / file
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    return Project.load(root)


def _statuses(project: Project) -> dict[str, tuple[str, list[str]]]:
    return {n: (c.status, c.followers) for n, c in project.changes().items()}


def test_plan_says_what_each_change_needs_and_a_full_refresh_rebuilds_from_the_inputs(
    spark, broker, unique, tmp_path: Path, engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, root = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine=engine)
    records = [order("o1", "u1", 1.0, 0), order("o2", "u1", 2.0, 1)]
    records += [order("o3", "u2", 3.0, 2), order("o1", "u1", 1.0, 3)]  # o1 again: deduped
    produce(broker.bootstrap, topic, [(None, r) for r in records])
    project = Project.load(root)
    ods, dwd = project.table_path("ods_orders"), project.table_path("dwd_orders")
    assert _statuses(project) == {"ods_orders": ("new", []), "dwd_orders": ("new", [])}

    project.pipeline(spark, "all", progress=lambda _: None).run(once=True)
    assert len(rows(ods, ["_offset"])) == 4 and len(rows(dwd, KEYS)) == 3
    assert _statuses(project) == {"ods_orders": ("unchanged", []), "dwd_orders": ("unchanged", [])}

    # An expectation is picked up by a restart; a stateful table's dedupe keys are not.
    project = _edit(root, "layers/ods/orders.yml", "on_violation: quarantine", "on_violation: drop")
    project = _edit(root, "layers/dwd/orders.yml", "keys: [order_id]", "keys: [order_id, user_id]")
    assert _statuses(project) == {"ods_orders": ("restart", []), "dwd_orders": ("full_refresh", [])}
    with pytest.raises(DefinitionChangedError) as refused:
        project.pipeline(spark, "all", progress=lambda _: None).run(once=True)
    assert str(refused.value).startswith(
        "Table `dwd_orders` (layers/dwd/orders.yml) changed since its last run so that it "
        "needs a full refresh: state changed: "
    )
    assert "`warehouse run --full-refresh dwd_orders`" in str(refused.value)

    # A sink partitioned anew rebuilds `ods_orders`, and `dwd_orders` follows it.
    project = _edit(
        root, "layers/ods/orders.yml", "mode: append}", "mode: append, partition_by: [user_id]}"
    )
    assert _statuses(project) == {
        "ods_orders": ("full_refresh", ["dwd_orders"]),
        "dwd_orders": ("full_refresh", []),
    }
    assert main(["plan", "--project", str(root)]) == 0
    said = capsys.readouterr().out
    assert "   change:      changed, needs a full refresh (sink changed: " in said
    assert ", with `dwd_orders`" in said
    assert said.rstrip().endswith(
        "`warehouse run --full-refresh ods_orders` resets and rebuilds them and the tables that follow them"
    )

    project.pipeline(spark, full_refresh=["ods_orders"], progress=lambda _: None).run(once=True)
    coordinates = rows(ods, ["_partition", "_offset"])
    assert len(coordinates) == len(set(coordinates)) == 4
    assert rows(dwd, KEYS) == [("o1", "u1"), ("o2", "u1"), ("o3", "u2")]
    assert _statuses(project) == {"ods_orders": ("unchanged", []), "dwd_orders": ("unchanged", [])}

    # `--refresh`: only the tables named run.
    produce(broker.bootstrap, topic, [(None, order("o4", "u2", 4.0, 4))])
    assert main(["run", "--project", str(root), "--refresh", "ods_orders", "--once"]) == 0
    assert len(rows(ods, ["_offset"])) == 5 and len(rows(dwd, KEYS)) == 3

    # Retention took the topic's first two records: a rebuild would lose them.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    next(iter(admin.delete_records([TopicPartition(topic, 0, 2)]).values())).result(30)
    capsys.readouterr()
    refresh = ["run", "--project", str(root), "--full-refresh", "ods_orders", "--once"]
    assert main(refresh) == 2
    error = capsys.readouterr().err
    assert error.startswith(
        f"error: Table `ods_orders` (layers/ods/orders.yml): a full refresh would lose rows: "
        f"topic `{topic}` partition 0: the table's rows start at offset 0, but a rebuild would "
        "read from offset 2 (the log now starts at 2)."
    ), error
    assert "add `--allow-data-loss`" in error
    assert len(rows(ods, ["_offset"])) == 5  # nothing reset

    assert main([*refresh, "--allow-data-loss"]) == 0
    assert rows(ods, ["_offset"]) == [(2,), (3,), (4,)]
    assert rows(dwd, KEYS) == [("o1", "u1"), ("o3", "u2"), ("o4", "u2")]
