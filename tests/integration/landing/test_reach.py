"""Whether the landing path runs for a table on the native engines (`landing_blocker`).

Tasks that write a table on S3 (the S3-API server) take it; tasks that cannot write
under the table, and a table delta-spark made with a feature delta-rs does not write,
keep the table on Spark's path with the reason in the log (a table whose deletion
vectors are turned on after its first batch takes Spark's path from the next run on), and its rows are still
exactly the topic's. Real Spark, real delta-spark and delta-rs tables, real S3 server,
real broker.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pyarrow as pa
import pytest

import streams.storage as storage
from streams.delta import STAGING_DIR
from streams.kafka.admin import produce
from streams.landing import landing_blocker
from streams.landing.reach import _tasks_blocker
from streams.landing.tasks import TaskSpec
from tests.integration.projects import new_topic, start_project
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark]

SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "city": {"type": "string"}},
    "required": ["id"],
}


def test_tasks_that_write_on_s3_take_the_path_and_leave_nothing(spark, s3_root) -> None:
    table = storage.join(s3_root, "ods_t")
    assert landing_blocker(spark, table) is None
    # The probe's folder is gone (the staging folder's own marker may stay, as after a
    # batch).
    assert storage.list_names(storage.join(table, STAGING_DIR)) == []


def test_the_tasks_write_with_the_drivers_storage_section(spark, s3_root) -> None:
    """The section the driver loaded goes with the tasks' work and is put over the
    executors' own variables: a secret of its own that the server refuses is the one
    the probing tasks use, though their environment holds the right one."""
    table = storage.join(s3_root, "ods_t")
    before = storage.overrides()
    sc = spark.sparkContext

    def workers() -> list[dict[str, object]]:
        return sc.parallelize(range(4), 4).map(lambda _: storage.overrides()).collect()

    workers_before = workers()
    wrong = {
        "options": {
            "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": "not-the-secret",
        }
    }
    storage.configure(wrong)
    try:
        reason = _tasks_blocker(spark, table)
        assert (
            TaskSpec(table, "stage", pa.schema([]), pa.schema([]), (), (), ()).storage_settings
            == wrong
        )
    finally:
        storage.configure(before)
    assert reason is not None and reason.startswith("Spark's tasks cannot run it ("), reason
    assert "not-the-secret" not in reason
    assert workers() == workers_before  # the section held for the probe's tasks only
    assert _tasks_blocker(spark, table) is None


def test_tasks_that_cannot_write_under_the_table_say_why(spark, tmp_path: Path) -> None:
    table = tmp_path / "t"
    table.mkdir()
    (table / STAGING_DIR).write_text("a file where the staging folder goes")
    reason = _tasks_blocker(spark, str(table))
    assert reason is not None and reason.startswith("Spark's tasks cannot run it ("), reason
    assert "Error" in reason, reason
    assert _tasks_blocker(spark, str(tmp_path / "free")) is None


@pytest.mark.usefixtures("native_jars")
@pytest.mark.parametrize(
    ("props", "feature"),
    [
        ("'delta.enableDeletionVectors' = 'true'", "`deletionVectors`"),
        ("'delta.columnMapping.mode' = 'name'", "column"),
    ],
)
def test_a_feature_delta_rs_does_not_write_is_named(
    spark, tmp_path: Path, props: str, feature: str
) -> None:
    path = tmp_path / "t"
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ({props})")
    reason = landing_blocker(spark, str(path))
    assert reason is not None and feature in reason, reason
    plain = tmp_path / "plain"
    spark.sql(f"CREATE TABLE delta.`{plain}` (id BIGINT) USING delta")
    assert landing_blocker(spark, str(plain)) is None


@pytest.mark.kafka
@pytest.mark.usefixtures("native_jars")
def test_native_table_with_deletion_vectors_goes_to_spark_path(
    spark, broker, unique, tmp_path: Path, caplog
) -> None:
    topic = new_topic(broker.bootstrap, unique("reach"), partitions=2)
    root = tmp_path / "proj"
    ods = start_project(
        root,
        broker.bootstrap,
        "ods",
        delta="native",
        kafka="native",
        schemas={"flat.json": json.dumps(SCHEMA)},
    )
    source = f"source:\n  kafka: {{topic: {topic}, format: json, schema: flat}}\n"
    expect = (
        "expectations:\n  - expect_column_values_to_not_be_null: {column: city}\n"
        "    on_violation: quarantine\n"
    )
    for name in ("ods_dv", "ods_plain"):
        (ods / f"{name}.yml").write_text(f"table: {name}\n{source}sink: {{mode: append}}\n{expect}")
    project = Project.load(root)
    caplog.set_level(logging.INFO, logger="warehouse")

    def run(first: int) -> dict[str, object]:
        records = [
            (f"k{i}", json.dumps({"id": i, "city": f"c{i}" if i % 10 else None}))
            for i in range(first, first + 100)
        ]
        produce(broker.bootstrap, topic, records)
        return {r.table: r for r in Pipeline(project, spark, layer="ods").run(once=True)}

    run(0)
    # A feature turned on with delta-spark after the table's first batch.
    dv = project.table_path("ods_dv")
    spark.sql(
        f"ALTER TABLE delta.`{dv}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    results = run(100)

    good = sorted((i, f"c{i}") for i in range(200) if i % 10)
    for name in ("ods_dv", "ods_plain"):
        # delta-spark reads them: delta-rs reads no table with deletion vectors.
        table = spark.read.format("delta").load(project.table_path(name))
        assert sorted(tuple(r) for r in table.select("id", "city").collect()) == good
        assert spark.read.format("delta").load(project.quarantine_path(name)).count() == 20
        assert (results[name].rows_read, results[name].quarantined) == (100, 10)
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        "ods_dv: not on the Arrow landing path, as the table has feature(s)" in m
        and "`deletionVectors`" in m
        for m in messages
    ), messages
    batches = [m for m in messages if "rows in" in m]
    assert sum("ods_plain: batch" in m and "(Arrow)" in m for m in batches) == 2, batches
    assert any("ods_dv: batch 0" in m and "(Arrow)" in m for m in batches), batches
    assert not any("ods_dv: batch 1" in m and "(Arrow)" in m for m in batches), batches


@pytest.mark.kafka
def test_a_first_batchs_tasks_find_the_python_workers_started(
    spark, broker, unique, tmp_path: Path, s3_root: str, caplog, engine: str
) -> None:
    """Off a local table the Python workers start before the first batch: on the python
    engine in the warm-up job its compile starts, on the native ones in the probe's job.
    New workers for this test: Spark keeps a set of Python workers per environment of its
    tasks, and the context's environment gets a variable of its own."""
    topic = new_topic(broker.bootstrap, unique("warm"), partitions=4)
    root = tmp_path / "proj"
    ods = start_project(
        root,
        broker.bootstrap,
        "ods",
        delta=engine,
        kafka=engine,
        schemas={"flat.json": json.dumps(SCHEMA)},
    )
    conf = root / "conf" / "local.yml"
    local_root = f"warehouse_root: {root / '.warehouse'}"
    conf.write_text(conf.read_text().replace(local_root, f"warehouse_root: {s3_root}"))
    (ods / "ods_warm.yml").write_text(
        f"table: ods_warm\nsource:\n  kafka: {{topic: {topic}, format: json, schema: flat}}\n"
        "sink: {mode: append}\nexpectations:\n"
        "  - expect_column_values_to_not_be_null: {column: city}\n"
        "    on_violation: quarantine\n"
    )
    records = [
        (f"k{i}", json.dumps({"id": i, "city": f"c{i}" if i % 10 else None})) for i in range(400)
    ]
    produce(broker.bootstrap, topic, records)
    project = Project.load(root)
    caplog.set_level(logging.INFO)
    sc = spark.sparkContext
    key = f"WAREHOUSE_TEST_WORKERS_{unique('w').replace('-', '_')}"
    sc.environment[key] = "1"
    try:
        (result,) = Pipeline(project, spark, layer="ods").run(once=True)
    finally:
        del sc.environment[key]
    assert (result.rows_read, result.quarantined) == (400, 40)
    messages = [r.getMessage() for r in caplog.records]
    tasks = [m for m in messages if "ods_warm: batch 0:" in m and "Arrow task(s)" in m]
    assert len(tasks) == 1, messages
    assert tasks[0].endswith(
        "; 2 of 2 task(s) in a started Python worker, 2 read Kafka with the column reader"
    ), tasks[0]
