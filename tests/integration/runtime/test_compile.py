"""The query builder on the test session: a windowed aggregate over a stream joined with a
table snapshot, upserted by key; Python transforms and their error boundary."""

from __future__ import annotations

import datetime as dt
import json
import pickle
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.integration.projects import new_topic, start_project
from tests.integration.runtime.helpers import T0, at, rows
from tests.unit.runtime.projects import write_dws_project, write_project
from warehouse import Project
from warehouse.compile.errors import CompileError, TransformError
from warehouse.compile.transform import CompiledTransform, apply_transform
from warehouse.runtime.pipeline import Pipeline
from warehouse.spec.pycode import forget_modules

pytestmark = pytest.mark.spark

CDF = {"delta.enableChangeDataFeed": "true"}
TS = pa.timestamp("us", tz="UTC")


@pytest.mark.kafka
def test_window_aggregate_joined_with_a_snapshot_upserts_by_window_and_key_and_publishes(
    session, broker, unique, tmp_path: Path
) -> None:
    """On a classic and on a Spark Connect session (where the batches run and publish in
    the server's Python worker)."""
    topic = unique("mv.city")
    project = Project.load(
        write_dws_project(tmp_path / "proj", bootstrap=broker.bootstrap, publish_topic=topic)
    )
    write_deltalake(
        str(project.table_path("dim_users")),
        pa.table({"user_id": ["u1", "u2"], "city": ["Paris", "Oslo"]}),
        configuration=CDF,
    )
    seconds = [0, 30, 70, 80]
    write_deltalake(
        str(project.table_path("dwd_orders")),
        pa.table(
            {
                "order_id": ["o1", "o2", "o3", "o4"],
                "user_id": ["u1", "u2", "u1", "u9"],  # u9 has no city: dropped by the join
                "amount": pa.array(
                    [Decimal("10.50"), Decimal("20.00"), Decimal("5.00"), Decimal("1.00")],
                    pa.decimal128(12, 2),
                ),
                "event_time": pa.array([T0 + dt.timedelta(seconds=s) for s in seconds], TS),
            }
        ),
        configuration=CDF,
    )
    results = Pipeline(project, session, layer="dws").run(once=True)
    assert [(r.table, r.skipped) for r in results] == [("dws_city_1m", None)]
    out = project.table_path("dws_city_1m")
    assert rows(out, ["window_start", "window_end", "city", "gmv", "orders"]) == [
        (at(0), at(1), "Oslo", Decimal("20.00"), 1),
        (at(0), at(1), "Paris", Decimal("10.50"), 1),
        (at(1), at(2), "Paris", Decimal("5.00"), 1),
    ]
    # Published as a compacted changelog: key = the sink keys, value = the row.
    published = consume(broker.bootstrap, topic, count=3)
    assert sorted((json.loads(k)["city"], json.loads(v)["gmv"]) for k, v in published) == [
        ("Oslo", "20.00"),
        ("Paris", "10.50"),
        ("Paris", "5.00"),
    ]


def consume(
    bootstrap: str, topic: str, *, count: int, timeout: float = 60
) -> list[tuple[bytes, bytes]]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{topic}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    out: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                out.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


TRANSFORMS = """
from pyspark.sql import functions as F


def build(df, context):
    return df.withColumn("built_for", F.lit(f"{context.table}/{context.layer}"))


def broken(df, context):
    raise ValueError("no column `qty`")


def not_a_frame(df, context):
    return 42
"""


def _python_project(root: Path) -> Project:
    write_project(root, bootstrap="127.0.0.1:9", dwd=False)
    (root / "transforms").mkdir()
    (root / "transforms" / "__init__.py").write_text("")
    (root / "transforms" / "orders.py").write_text(TRANSFORMS)
    (root / "layers" / "dwd").mkdir()
    for name in ("build", "broken", "not_a_frame"):
        (root / "layers" / "dwd" / f"{name}.yml").write_text(
            f"table: dwd_{name}\nsource: {{table: ods_orders}}\n"
            f"transform: {{python: 'transforms.orders:{name}'}}\n"
        )
    return Project.load(root)


def test_python_transform_runs_with_its_context_inside_an_error_boundary(
    spark, tmp_path: Path
) -> None:
    project = _python_project(tmp_path / "proj")
    df = spark.createDataFrame([("o1", 1.0)], "order_id string, amount double")
    built = apply_transform(df, project=project, defn=project.tables["dwd_build"], views={})
    assert [tuple(r) for r in built.collect()] == [("o1", 1.0, "dwd_build/dwd")]

    with pytest.raises(TransformError) as e:
        apply_transform(df, project=project, defn=project.tables["dwd_broken"], views={})
    assert "Table `dwd_broken` (layer `dwd`)" in str(e.value)
    assert "transforms.orders:broken" in str(e.value) and "no column `qty`" in str(e.value)
    assert isinstance(e.value.__cause__, ValueError)
    assert (e.value.table, e.value.layer) == ("dwd_broken", "dwd")

    with pytest.raises(TransformError, match="returned `int`, expected a DataFrame"):
        apply_transform(df, project=project, defn=project.tables["dwd_not_a_frame"], views={})


def test_a_compiled_python_transform_runs_the_function_it_compiled_with(
    spark, tmp_path: Path
) -> None:
    # A batch calls the function its query compiled with and imports nothing: batches
    # of tables side by side run on threads of their own, and the process's imports are
    # not theirs to change. The code changed on disk runs from the next compile on.
    project = _python_project(tmp_path / "proj")
    compiled = CompiledTransform(project, project.tables["dwd_build"], {})
    module = tmp_path / "proj" / "transforms" / "orders.py"
    module.write_text(TRANSFORMS.replace('"built_for"', '"rebuilt_for"'))
    forget_modules(("transforms",))
    df = spark.createDataFrame([("o1", 1.0)], "order_id string, amount double")
    assert compiled.apply(df, batch_id=7).columns == ["order_id", "amount", "built_for"]
    again = CompiledTransform(project, project.tables["dwd_build"], {})
    assert again.apply(df).columns == ["order_id", "amount", "rebuilt_for"]

    # Pickled (a Spark Connect server's worker gets the program so), it imports the
    # function again from the project's folder, never as a reference to a module the
    # unpickling process cannot import.
    forget_modules(("transforms",))
    restored = pickle.loads(pickle.dumps(again))
    assert restored.python is not None and restored.python.__name__ == "build"
    assert restored.apply(df).columns == ["order_id", "amount", "rebuilt_for"]


def test_sql_transform_error_names_table_and_file(spark, tmp_path: Path) -> None:
    root = write_project(tmp_path / "proj", bootstrap="127.0.0.1:9")
    project = Project.load(root)
    df = spark.createDataFrame([("o1",)], "order_id string")  # no amount, user_id, event_time
    with pytest.raises(TransformError) as e:
        apply_transform(df, project=project, defn=project.tables["dwd_orders"], views={})
    assert "Table `dwd_orders` (layer `dwd`, layers/dwd/orders.yml)" in str(e.value)
    assert e.value.__cause__ is not None


@pytest.mark.kafka
def test_dead_letters_need_the_coordinates_of_the_rows_they_quarantine(
    spark, broker, unique, tmp_path: Path
) -> None:
    topic = new_topic(broker.bootstrap, unique("orders"))
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}}
    root = tmp_path / "proj"
    ods = start_project(root, broker.bootstrap, "ods", schemas={"o.json": json.dumps(schema)})
    (ods / "orders.yml").write_text(
        "table: ods_orders\n"
        f"source: {{kafka: {{topic: {topic}, format: json, schema: o}}}}\n"
        'transform: {sql: "SELECT id, _offset FROM source"}\n'
        f"quarantine: {{kafka: {{topic: {topic}.dlq}}}}\n"
        "expectations:\n"
        "  - expect_column_values_to_not_be_null: {column: id}\n"
        "    on_violation: quarantine\n"
    )
    with pytest.raises(CompileError, match="lack `_topic`, `_partition`, which name"):
        Pipeline(Project.load(root), spark, layer="ods").run(once=True)
