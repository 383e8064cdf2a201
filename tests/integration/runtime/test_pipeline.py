"""The runner in-process on the test session: one-shot runs through both layers, reruns,
new records, `recover` from the table's recorded offsets, and `status`.

Real broker process, real Spark, real Delta tables; checked with delta-rs.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from streams.kafka.admin import ensure_topic, produce
from tests.integration.runtime.helpers import at, order, orders_project, rows, version
from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.runtime.errors import DefinitionChangedError, QueryFailedError, RuntimeConfigError
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.recover import recover, reset
from warehouse.runtime.status import status
from warehouse.spec.paths import FINGERPRINT_FILE

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

ODS_COLS = ["order_id", "user_id", "amount", "event_time", "_partition", "_offset"]
DWD_COLS = ["order_id", "user_id", "amount", "event_time"]


def test_once_rerun_new_records_recover_and_status(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    from decimal import Decimal

    topic = unique("orders")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    project = Project.load(
        write_project(tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, engine=engine)
    )
    ods, dwd = project.table_path("ods_orders"), project.table_path("dwd_orders")
    quarantine = project.quarantine_path("ods_orders")
    lines: list[str] = []

    def run() -> dict[str, object]:
        results = Pipeline(project, spark, layer="all", progress=lines.append).run(once=True)
        return {r.table: r for r in results}

    produce(
        broker.bootstrap,
        topic,
        [
            ("a", order("o1", "u1", 10.5, 0)),
            ("b", order("o2", "u2", 20.0, 1)),
            ("a", order("o1", "u1", 10.5, 0)),  # duplicate: kept in ODS, once in DWD
            ("x", "not json"),  # parse error: quarantined
            ("n", order(None, "u9", 5.0, 1)),  # null order_id: quarantined by the expectation
            ("c", order("o3", "u3", -1.0, 2)),  # filtered by the DWD SQL
        ],
    )
    first = run()
    assert rows(ods, ODS_COLS) == [
        ("o1", "u1", 10.5, at(0), 0, 0),
        ("o1", "u1", 10.5, at(0), 0, 2),
        ("o2", "u2", 20.0, at(1), 0, 1),
        ("o3", "u3", -1.0, at(2), 0, 5),
    ]
    assert rows(quarantine, ["source_offset"]) == [(3,), (4,)]
    assert rows(dwd, DWD_COLS) == [
        ("o1", "u1", Decimal("10.50"), at(0)),
        ("o2", "u2", Decimal("20.00"), at(1)),
    ]
    ods_result = first["ods_orders"]
    assert (ods_result.rows_read, ods_result.rows_written, ods_result.quarantined) == (6, 4, 2)
    assert any(line.startswith("ods_orders [ods]: 1 batch(es), 6 rows in") for line in lines)
    source = f"ods_orders [ods]: running once from kafka `{topic}` as json (orders) from "

    def started_from() -> list[str]:  # where each run of ods_orders said it starts
        return [line.removeprefix(source) for line in lines if line.startswith(source)]

    # Status: offsets recorded in the table, nothing left to read.
    st = {r["table"]: r for r in status(project)}
    assert st["ods_orders"]["committed_offsets"] == {topic: {"0": 6}}
    assert st["ods_orders"]["lag"] == {"total": 0, "topics": {topic: 0}}
    assert (st["ods_orders"]["rows"], st["ods_orders"]["quarantine_rows"]) == (4, 2)
    assert st["dwd_orders"]["rows"] == 2 and st["dwd_orders"]["lag"] is None

    # A second run with no new data changes nothing.
    before = (version(ods), version(dwd), version(quarantine))
    again = run()
    assert (version(ods), version(dwd), version(quarantine)) == before
    assert again["ods_orders"].rows_written == 0
    assert started_from() == ["earliest", "its checkpoint"]

    # Recover (a checkpoint rebuilt from the table's newest batch, which the next run
    # replays: nothing of it is written twice), and new records meanwhile: the next run
    # appends exactly those; the duplicate o2 stays out of DWD.
    done = recover(project, "ods_orders")
    ckpt = project.checkpoint_path("ods_orders")
    assert (done["batch_id"], done["replays"]) == (0, True)
    assert done["starting_offsets"] == {topic: {"0": 0}}
    assert done["ending_offsets"] == {topic: {"0": 6}}
    assert sorted(p.name for p in (Path(ckpt) / "offsets").iterdir()) == ["0"]
    produce(
        broker.bootstrap,
        topic,
        [("d", order("o4", "u4", 40.0, 3)), ("b", order("o2", "u2", 20.0, 1))],
    )
    assert status(project)[0]["lag"] == {"total": 2, "topics": {topic: 2}}
    third = run()
    assert started_from()[-1] == "its checkpoint"
    assert (third["ods_orders"].rows_read, third["ods_orders"].rows_written) == (8, 2)
    assert rows(ods, ODS_COLS) == [
        ("o1", "u1", 10.5, at(0), 0, 0),
        ("o1", "u1", 10.5, at(0), 0, 2),
        ("o2", "u2", 20.0, at(1), 0, 1),
        ("o2", "u2", 20.0, at(1), 0, 7),
        ("o3", "u3", -1.0, at(2), 0, 5),
        ("o4", "u4", 40.0, at(3), 0, 6),
    ]
    assert rows(dwd, ["order_id"]) == [("o1",), ("o2",), ("o4",)]
    assert rows(quarantine, ["source_offset"]) == [(3,), (4,)]


def test_a_topic_that_does_not_exist_fails_the_run_before_any_query_naming_it(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    """Spark's Kafka reader fails on a missing topic with the broker's "does not host this
    topic-partition", the Python engines' reader read it as empty: both fail alike, before
    a table is created, naming the table, its file, the topic and the bootstrap."""
    topic = unique("misspelt")
    project = Project.load(
        write_project(tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, engine=engine)
    )
    with pytest.raises(QueryFailedError) as failed:
        Pipeline(project, spark, layer="ods", progress=lambda _: None).run(once=True)
    assert failed.value.table == "ods_orders"
    assert str(failed.value).startswith(
        f"Table `ods_orders` ({project.tables['ods_orders'].path}) reads Kafka topic "
        f"`{topic}`, which does not exist on `{broker.bootstrap}`."
    )
    assert "`source.kafka.topic`" in str(failed.value)
    assert not Path(project.table_path("ods_orders")).exists()
    assert not Path(project.checkpoint_path("ods_orders")).exists()


def test_a_kafka_table_whose_query_cannot_be_built_names_the_table_and_its_topic(
    spark, broker, unique, tmp_path: Path, native_jars: None
) -> None:
    """A build that fails (here the native Kafka engine refusing a SASL mechanism its Java
    client has no username/password login for) is reported naming the table, the cause
    and the topic it reads; nothing is created."""
    topic, root = orders_project(
        tmp_path / "proj", broker.bootstrap, unique, dwd=False, engine="native"
    )
    spec = root / "layers" / "ods" / "orders.yml"
    spec.write_text(
        spec.read_text().replace(
            "schema: orders}",
            "schema: orders, options: {sasl.mechanism: GSSAPI, sasl.username: u, "
            "sasl.password: p}}",
        )
    )
    project = Project.load(root)
    with pytest.raises(QueryFailedError) as failed:
        Pipeline(project, spark, layer="ods", progress=lambda _: None).run(once=True)
    message = str(failed.value)
    assert message.startswith("Table `ods_orders` (layer `ods`): its query could not be built: ")
    assert "SASL mechanism `GSSAPI`" in message and message.endswith(
        f"; its inputs: topic `{topic}`. Repair or rebuild what the cause names (`warehouse "
        "status` shows each table), then run again; nothing was written."
    )
    assert not Path(project.table_path("ods_orders")).exists()


def ran_then_edited(
    spark, broker, unique, tmp_path: Path, edit: tuple[str, str], second: str
) -> tuple[Project, Path]:
    """The orders project after a run of one order, with `edit` (old, new) made to
    `dwd_orders`' spec and a `second` order produced: the project loaded again, and the
    spec's path. The fingerprint the run recorded in `dwd_orders`' checkpoint is removed,
    as a checkpoint holds none that the framework wrote before it recorded them: the run
    does not know before the query starts what changed, and the query's own failure
    says it."""
    topic, root = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine="python")
    produce(broker.bootstrap, topic, [("a", order("o1", "u1", 10.5, 0))])
    Pipeline(Project.load(root), spark, layer="all", progress=lambda _: None).run(once=True)
    spec = root / "layers" / "dwd" / "orders.yml"
    spec.write_text(spec.read_text().replace(*edit))
    produce(broker.bootstrap, topic, [("b", second)])
    project = Project.load(root)
    _forget_fingerprint(project, "dwd_orders")
    return project, spec


def _forget_fingerprint(project: Project, table: str) -> None:
    Path(project.checkpoint_path(table), FINGERPRINT_FILE).unlink()


def test_a_table_that_has_to_start_over_says_how_and_following_it_rebuilds_it(
    spark, broker, unique, tmp_path: Path
) -> None:
    """Editing a stateful table (here its dedupe keys) makes Spark refuse the state its
    checkpoint keeps; replacing its input table (a reset, then a run) leaves its position
    in the old table, which the Python Delta source refuses as delta-spark's does (that
    message is tested in tests/unit/runtime/test_errors.py). Each error names the table,
    its file and checkpoint and the way to rebuild it, and following it rebuilds it."""
    project, _ = ran_then_edited(
        spark,
        broker,
        unique,
        tmp_path,
        ("keys: [order_id]", "keys: [order_id, user_id]"),
        order("o1", "u2", 10.5, 0),
    )
    with pytest.raises(QueryFailedError) as failed:
        Pipeline(project, spark, layer="all", progress=lambda _: None).run(once=True)
    message = str(failed.value)
    assert failed.value.table == "dwd_orders"
    assert message.startswith(
        f"Table `dwd_orders` (layers/dwd/orders.yml): the state its checkpoint "
        f"{project.checkpoint_path('dwd_orders')} keeps no longer fits its definition "
        "([STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE]"
    ), message
    assert (
        "`warehouse run --full-refresh dwd_orders`: it resets the table and reads "
        "`ods_orders` again from the start. To keep the table as it is, restore the "
        "definition the checkpoint was written with." in message
    )
    assert rows(project.table_path("dwd_orders"), ["order_id", "user_id"]) == [("o1", "u1")]

    Pipeline(project, spark, full_refresh=["dwd_orders"], progress=lambda _: None).run(once=True)
    assert rows(project.table_path("dwd_orders"), ["order_id", "user_id"]) == [
        ("o1", "u1"),
        ("o1", "u2"),
    ]

    # The input table rebuilt under its reader: the reader's recorded fingerprint names
    # the old table, so the run refuses it before any query starts...
    reset(project, "ods_orders")
    with pytest.raises(DefinitionChangedError) as refused:
        Pipeline(project, spark, layer="all", progress=lambda _: None).run(once=True)
    assert "its input table `ods_orders` was rebuilt since it last read it" in str(refused.value)
    assert not Path(project.table_path("ods_orders")).exists()  # nothing ran
    # ...and without one, the reader's query refuses the position it holds in the old one.
    _forget_fingerprint(project, "dwd_orders")
    with pytest.raises(QueryFailedError) as failed:
        Pipeline(project, spark, layer="all", progress=lambda _: None).run(once=True)
    assert str(failed.value).startswith(
        "Table `dwd_orders` (layers/dwd/orders.yml): its input table `ods_orders` was "
        "replaced (reset, or deleted and written again) since its checkpoint "
        f"{project.checkpoint_path('dwd_orders')} last read it"
    ), str(failed.value)
    assert len(rows(project.table_path("ods_orders"), ["order_id"])) == 2  # rebuilt
    Pipeline(project, spark, full_refresh=["dwd_orders"], progress=lambda _: None).run(once=True)
    assert rows(project.table_path("dwd_orders"), ["order_id", "user_id"]) == [
        ("o1", "u1"),
        ("o1", "u2"),
    ]


def test_a_batch_failing_with_our_own_error_ends_its_query_quietly_saying_the_fix(
    spark, broker, unique, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch that fails with the framework's own error (here a column whose type the
    table's SQL changed) is reported by that error alone: its query ends as stopped, so
    Spark logs no failed query with its stack traces, and py4j logs no traceback. The
    error says where to change the type back, or the resets that rebuild the table."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Ended(StreamingQueryListener):
        def __init__(self) -> None:
            self.exceptions: dict[str, str | None] = {}

        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            pass

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            self.exceptions[str(event.id)] = event.exception

    project, spec = ran_then_edited(
        spark,
        broker,
        unique,
        tmp_path,
        ("AS DECIMAL(12,2)", "AS DOUBLE"),
        order("o2", "u2", 20.0, 1),
    )

    ended = Ended()
    spark.streams.addListener(ended)
    caplog.set_level(logging.ERROR, logger="py4j.clientserver")
    try:
        with pytest.raises(QueryFailedError) as failed:
            Pipeline(project, spark, layer="all", progress=lambda _: None).run(once=True)
        metadata = Path(project.checkpoint_path("dwd_orders")) / "metadata"
        query_id = json.loads(metadata.read_text())["id"]
        deadline = time.monotonic() + 60
        while query_id not in ended.exceptions and time.monotonic() < deadline:
            time.sleep(0.2)  # the listener bus tells of the query's end a moment later
    finally:
        spark.streams.removeListener(ended)
    assert query_id in ended.exceptions and ended.exceptions[query_id] is None  # stopped
    assert [r for r in caplog.records if r.name == "py4j.clientserver"] == []
    assert str(failed.value) == (
        f"Table `dwd_orders` (layers/dwd/orders.yml): column `amount` has type "
        f"`decimal(12,2)` in the table {project.table_path('dwd_orders')} but `double` in "
        "the batch, and a table does not change a column's type. Nothing was written. To "
        "rebuild the table from its input: `warehouse run --full-refresh dwd_orders`: it "
        "resets the table and reads `ods_orders` again from the start. To keep the table as "
        "it is, cast `amount` back to `decimal(12,2)` in its query (sql)."
    )
    assert rows(project.table_path("dwd_orders"), ["order_id"]) == [("o1",)]
    spec.write_text(spec.read_text().replace("AS DOUBLE", "AS DECIMAL(12,2)"))
    Pipeline(Project.load(project.path), spark, layer="dwd", progress=lambda _: None).run(once=True)
    assert rows(project.table_path("dwd_orders"), ["order_id"]) == [("o1",), ("o2",)]


def test_a_checkpoint_of_the_other_delta_engine_fails_the_run_before_any_query(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    """delta-spark's source and the Python one record a table's position in forms the
    other cannot read (the Python source failed with `KeyError: 'version'` in its worker,
    delta-spark's with DELTA_INVALID_SOURCE_VERSION). A run on the other engine (as
    `engines: auto` gives when the jars come or go) fails before any query, naming the
    table, its checkpoint and both ways out; starting the table over is one. A
    Kafka-sourced table's checkpoint resumes on either engine."""
    topic = unique("orders")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce(broker.bootstrap, topic, [("a", order("o1", "u1", 10.5, 0))])
    root = write_project(tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, engine=engine)
    Pipeline(Project.load(root), spark, layer="all", progress=lambda _: None).run(once=True)

    other = "python" if engine == "native" else "native"
    moved = Project.load(root, engines={"kafka": other, "delta": other})
    ods, dwd = moved.table_path("ods_orders"), moved.table_path("dwd_orders")
    produce(broker.bootstrap, topic, [("b", order("o2", "u2", 20.0, 1))])
    before = version(ods)
    with pytest.raises(RuntimeConfigError) as refused:
        Pipeline(moved, spark, layer="all", progress=lambda _: None).run(once=True)
    message = str(refused.value)
    assert refused.value.table == "dwd_orders"
    assert message.startswith(
        f"Table `dwd_orders` ({moved.tables['dwd_orders'].path}): its checkpoint "
        f"{moved.checkpoint_path('dwd_orders')} was written by "
    )
    assert f"`engines.delta` resolved to `{other}`" in message
    assert f"`engines: {{delta: {engine}}}`" in message
    assert "`warehouse reset --table dwd_orders --yes`" in message
    assert version(ods) == before  # no query ran, the Kafka-sourced one neither

    reset(moved, "dwd_orders")
    Pipeline(moved, spark, layer="all", progress=lambda _: None).run(once=True)
    assert rows(dwd, ["order_id"]) == [("o1",), ("o2",)]
    # A Kafka-sourced table's checkpoint resumes on either engine: both record the same
    # offsets, so o1 is not read again.
    assert rows(ods, ["order_id", "_offset"]) == [("o1", 0), ("o2", 1)]
