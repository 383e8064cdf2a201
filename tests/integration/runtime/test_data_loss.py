"""A partition whose log ends below the query's position (the topic deleted and created
again, or a broker that lost records): the run fails by default on both engines, naming
the table, the topic, the partition and both offsets; with `on_data_loss: skip` it goes
on and the batch's commit info records what it skipped.

Real broker process, the shared Spark session, real Delta tables; each engine.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable

from streams.delta.target import recorded_info, recorded_value
from streams.kafka.admin import ensure_topic, produce
from tests.integration.runtime.helpers import order, rows
from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.errors import QueryFailedError
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

COORDINATES = ["_partition", "_offset"]


def _recreate(bootstrap: str, topic: str, *, partitions: int) -> None:
    """Delete `topic` and create it again, empty."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    ensure_topic(bootstrap, topic, partitions=partitions)


def _fill(bootstrap: str, topic: str, first: int, per_partition: int) -> None:
    for p in (0, 1):
        produce(
            bootstrap,
            topic,
            [(f"k{i}", order(f"o{i}", "u1", 1.0, 0)) for i in range(first, first + per_partition)],
            partition=p,
        )


def test_a_log_that_ends_below_the_position_fails_the_run_or_is_skipped_and_recorded(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    topic = unique("recreated")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    root = write_project(
        tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, engine=engine, dwd=False
    )
    project = Project.load(root)
    ods = project.table_path("ods_orders")
    _fill(broker.bootstrap, topic, 0, 20)
    Pipeline(project, spark, tables=["ods_orders"]).run(once=True)
    assert len(rows(ods, COORDINATES)) == 40

    # The topic is created again and gets 3 records per partition: its logs end at offset
    # 3, below the position 20 the checkpoint holds in each.
    _recreate(broker.bootstrap, topic, partitions=2)
    _fill(broker.bootstrap, topic, 100, 3)
    with pytest.raises(QueryFailedError) as failed:
        Pipeline(project, spark, tables=["ods_orders"]).run(once=True)
    message = str(failed.value)
    assert re.match(
        f"Table `ods_orders` \\({project.tables['ods_orders'].path}\\): topic `{topic}` "
        "partition [01] ends at offset 3, below offset 20, where the table's checkpoint ",
        message,
    ), message
    assert "set `on_data_loss: skip` under `source.kafka`" in message
    assert len(rows(ods, COORDINATES)) == 40

    # `on_data_loss: skip`: the run goes on in the new log, and the batch's commit
    # records which partitions moved back, from where to where.
    yml = root / "layers" / "ods" / "orders.yml"
    yml.write_text(
        yml.read_text().replace("schema: orders}", "schema: orders, on_data_loss: skip}")
    )
    project = Project.load(root)
    Pipeline(project, spark, tables=["ods_orders"]).run(once=True)
    info = recorded_info(DeltaTable(str(ods)).history(1)[0])
    assert recorded_value(info["warehouse.dataLoss"]) == {topic: {"0": [20, 3], "1": [20, 3]}}
    landed = rows(ods, ["order_id"])
    if engine == "python":
        # The new log is read from its start.
        assert len(landed) == 46 and ("o100",) in landed
    else:
        # Spark's source skips the range it found reversed: the new log's first records.
        assert len(landed) == 40
    # The next records of the new log land as usual.
    _fill(broker.bootstrap, topic, 200, 2)
    Pipeline(project, spark, tables=["ods_orders"]).run(once=True)
    assert ("o200",) in rows(ods, ["order_id"])
    assert "warehouse.dataLoss" not in recorded_info(DeltaTable(str(ods)).history(1)[0])
