"""The checks a run makes of its tables' checkpoints before any query starts, on the
scaffolded project's files: no Spark (Delta tables written by delta-rs)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake

from warehouse import Project
from warehouse.runtime.checkpoints import refuse_new_over_table, refuse_other_engine
from warehouse.runtime.errors import NewCheckpointError, RuntimeConfigError
from warehouse.templates import scaffold

ALL = ["ods_events", "dwd_events", "ads_event_totals"]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """The scaffolded project: `ods_events` (Kafka), `dwd_events`, `ads_event_totals`."""
    scaffold(tmp_path / "shop")
    return Project.load(tmp_path / "shop")


def test_checkpoints_of_the_other_delta_engine_are_named_all_at_once(project: Project) -> None:
    """Every table whose checkpoint the other Delta engine wrote is named in one error
    (offsets written in Spark's layout, as delta-spark's source writes them); a Kafka
    checkpoint is not one of them. No Spark: the check reads the checkpoints' files."""
    native = '{"sourceVersion":1,"reservoirId":"r","reservoirVersion":4,"index":-1}'
    kafka = '{"events":{"0":6}}'
    for name, offset in (
        ("ods_events", kafka),
        ("dwd_events", native),
        ("ads_event_totals", native),
    ):
        offsets = Path(project.checkpoint_path(name)) / "offsets"
        offsets.mkdir(parents=True)
        (offsets / "0").write_text(f'v1\n{{"batchWatermarkMs":0}}\n{offset}')

    with pytest.raises(RuntimeConfigError) as refused:
        refuse_other_engine(project, ALL, "python")
    message = str(refused.value)
    assert message.startswith(
        f"Tables `dwd_events` ({project.tables['dwd_events'].path}), `ads_event_totals` "
        f"({project.tables['ads_event_totals'].path}): their checkpoints (under "
        f"{Path(project.checkpoint_path('dwd_events')).parent}) were written by delta-spark's"
    )
    assert "`engines.delta` resolved to `python`" in message
    assert "`engines: {delta: native}`" in message
    assert refused.value.table == "dwd_events"
    refuse_other_engine(project, ALL, "native")  # theirs


def _batch_commit(project: Project, name: str, batch: int, offsets: dict) -> None:
    """A commit of batch `batch` as the sink records it (its commit info)."""
    info = {
        "warehouse.sourceOffsets": json.dumps(offsets),
        "warehouse.batchId": str(batch),
        "warehouse.table": name,
        "warehouse.appId": f"{name}:q1",
    }
    write_deltalake(
        str(project.table_path(name)),
        pa.table({"x": [1]}),
        mode="append",
        commit_properties=CommitProperties(custom_metadata=info),
    )


def test_a_new_checkpoint_over_a_table_with_batches_is_refused_naming_the_way_out(
    project: Project,
) -> None:
    """A checkpoint lost (or deleted) under a table that holds batches: the run is refused
    before any query starts, every such table named with its way out: `recover` for the
    Kafka-sourced one, `reset` for the one read from a table. A table with no Delta table
    yet, or whose checkpoint has batches, is not named."""
    refuse_new_over_table(project, ALL)  # a first run: no table yet
    _batch_commit(project, "ods_events", 3, {"events": {"0": 6}})
    _batch_commit(project, "dwd_events", 0, {"version": 2})
    with pytest.raises(NewCheckpointError) as refused:
        refuse_new_over_table(project, ALL)
    error = refused.value
    assert error.exit_code == 2 and error.table == "ods_events"
    assert error.path == str(project.checkpoint_path("ods_events"))
    ods, dwd = str(error).splitlines()
    assert ods == (
        f"Table `ods_events` ({project.tables['ods_events'].path}): its checkpoint "
        f"{project.checkpoint_path('ods_events')} is new (lost, deleted or replaced), but the "
        f"table {project.table_path('ods_events')} already holds batches up to batch 3 of "
        '`ods_events:q1`, which read up to `{"events": {"0": 6}}`. A new checkpoint would '
        "read topic `events` again from `starting_offsets` (`earliest`) and write those "
        "records a second time. Run `warehouse recover --table ods_events` to go on from "
        "where the table is (a new checkpoint from the offsets its commits recorded), or "
        "`warehouse reset --table ods_events --yes` to rebuild it from the start."
    )
    assert "would read table `ods_events` again from its first version" in dwd
    assert dwd.endswith(
        "Run `warehouse reset --table dwd_events --yes` to rebuild it from its input (a "
        "table read from another table has no position to recover)."
    )
    # A checkpoint with a batch planned in it is the table's own: not named.
    for name in ("ods_events", "dwd_events"):
        offsets = Path(project.checkpoint_path(name)) / "offsets"
        offsets.mkdir(parents=True)
        (offsets / "0").write_text('v1\n{"batchWatermarkMs":0}\n{"events":{"0":6}}')
    refuse_new_over_table(project, ALL)
