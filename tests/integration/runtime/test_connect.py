"""A notebook on a Spark Connect session (Databricks serverless, standard access mode,
`pyspark-client`): `Project.load(...).pipeline(spark).run(once=True)` on both engines,
against the real Connect server pyspark ships (`connect_server`).

The batches run in the server's Python worker (`warehouse.runtime.remote`), so what is
checked is what a user sees: the tables' rows, read with delta-rs, and the run's result.
The same tables on a classic session are `test_pipeline`'s.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from deltalake.exceptions import TableNotFoundError

from streams.delta import DeltaTarget, delta_engine, write_batch
from streams.delta.tables import open_table
from streams.kafka.admin import ensure_topic, produce
from streams.sessions import connect_has_format, default_parallelism, is_connect
from tests.integration.runtime.helpers import at, order, rows
from tests.integration.runtime.test_cli_e2e import cli
from tests.support.broker_clients import read_topic
from tests.unit.runtime.projects import USERS_SCHEMA, write_project
from warehouse import Project
from warehouse.runtime.engines import resolve_engine

# A Connect server's session and every layer of the example through it: about 4 minutes
# a test on a busy 2-core machine, so the hang guard is wider than the suite's 600 s.
pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(1200)]


def _project(
    root: Path, *, orders: str, users: str, bootstrap: str, engine: str, schema: str
) -> Project:
    """The two-layer orders project (ODS sending its quarantined records to the dead-letter
    topic `<orders>.dlq`), and users from keyed CDC (`upsert-json`) into a current-state
    table (upsert) and a history (SCD2 by offset); every table by name in the server's
    catalog (`catalog:`, `schema` one per layer)."""
    write_project(
        root,
        topic=orders,
        bootstrap=bootstrap,
        engine=engine,
        extra_conf=f'catalog: {{schema: "{schema}"}}\n',
    )
    ods = root / "layers" / "ods" / "orders.yml"
    ods.write_text(ods.read_text() + f"quarantine: {{kafka: {{topic: {orders}.dlq}}}}\n")
    (root / "schemas" / "users.json").write_text(json.dumps(USERS_SCHEMA))
    source = f"source:\n  kafka: {{topic: {users}, format: upsert-json, schema: users}}\n"
    (root / "layers" / "dwd" / "users.yml").write_text(
        f"table: dim_users\n{source}sink: {{mode: upsert, keys: [user_id]}}\n"
    )
    (root / "layers" / "dwd" / "users_history.yml").write_text(
        f"table: dim_users_history\n{source}"
        "sink: {mode: scd2, keys: [user_id], sequence_by: _offset}\n"
    )
    return Project.load(root)


def test_a_connect_session_runs_the_layers_on_the_server(
    connect_spark, connect_mode, broker, unique, tmp_path: Path, engine: str
) -> None:
    orders, users = unique("orders"), unique("users")
    for topic in (orders, users):
        ensure_topic(broker.bootstrap, topic, partitions=1)
    produce(
        broker.bootstrap,
        orders,
        [
            ("a", order("o1", "u1", 10.5, 0)),
            ("b", order("o2", "u2", 20.0, 1)),
            ("a", order("o1", "u1", 10.5, 0)),  # duplicate: kept in ODS, once in DWD
            ("x", "not json"),  # parse error: quarantined
            ("n", order(None, "u9", 5.0, 1)),  # null order_id: quarantined
            ("c", order("o3", "u3", -1.0, 2)),  # filtered by the DWD SQL
        ],
    )
    produce(
        broker.bootstrap,
        users,
        [
            ('{"user_id": "u1"}', '{"user_id": "u1", "city": "Paris"}'),
            ('{"user_id": "u2"}', '{"user_id": "u2", "city": "Oslo"}'),
            ('{"user_id": "u1"}', '{"user_id": "u1", "city": "Rome"}'),
        ],
    )
    tag = uuid.uuid4().hex[:8]  # the server's catalog outlives the test
    project = _project(
        tmp_path / "proj",
        orders=orders,
        users=users,
        bootstrap=broker.bootstrap,
        engine=engine,
        schema=f"{{layer}}_{tag}",
    )

    results = {r.table: r for r in project.pipeline(connect_spark).run(once=True)}

    assert rows(project.table_path("ods_orders"), ["order_id", "amount", "_offset"]) == [
        ("o1", 10.5, 0),
        ("o1", 10.5, 2),
        ("o2", 20.0, 1),
        ("o3", -1.0, 5),
    ]
    assert rows(project.quarantine_path("ods_orders"), ["source_offset"]) == [(3,), (4,)]
    assert rows(project.table_path("dwd_orders"), ["order_id", "amount", "event_time"]) == [
        ("o1", Decimal("10.50"), at(0)),
        ("o2", Decimal("20.00"), at(1)),
    ]
    assert rows(project.table_path("dim_users"), ["user_id", "city"]) == [
        ("u1", "Rome"),
        ("u2", "Oslo"),
    ]
    assert rows(project.table_path("dim_users_history"), ["user_id", "city", "is_current"]) == [
        ("u1", "Paris", False),
        ("u1", "Rome", True),
        ("u2", "Oslo", True),
    ]
    assert {name: (r.batches, r.skipped) for name, r in results.items()} == {
        "ods_orders": (1, None),
        "dwd_orders": (results["dwd_orders"].batches, None),
        "dim_users": (1, None),
        "dim_users_history": (1, None),
    }
    assert results["dwd_orders"].batches >= 1
    # What the batches did, as the server's worker recorded it for the client.
    ods = results["ods_orders"]
    assert (ods.rows_read, ods.rows_written, ods.quarantined, ods.version) == (6, 4, 2, 0)
    assert ods.dead_letters == 2  # sent by the worker after the commits
    assert sorted(r.value for r in read_topic(broker.bootstrap, f"{orders}.dlq")) == sorted(
        [b"not json", order(None, "u9", 5.0, 1).encode()]
    )
    assert results["dim_users"].dead_letters is None
    assert results["dwd_orders"].rows_written == 2
    assert results["dim_users_history"].rows_read == 3
    assert all(r.version is not None for r in results.values())
    # By name in the server's catalog (tests/integration/runtime/test_catalog.py has more),
    # each with the rows read above from its path.
    for name in ("ods_orders", "dwd_orders", "dim_users", "dim_users_history"):
        by_name = connect_spark.table(f"{project.tables[name].layer}_{tag}.{name}").collect()
        by_path = rows(project.table_path(name), ["user_id"])
        assert sorted((r.user_id,) for r in by_name) == by_path, name
    quarantine = connect_spark.table(f"ods_{tag}.ods_orders__quarantine")
    assert sorted(r.source_offset for r in quarantine.collect()) == [3, 4]


def test_engine_resolution_asks_the_connect_server(connect_spark) -> None:
    assert is_connect(connect_spark)
    assert resolve_engine(connect_spark, "kafka", "auto") == "native"
    assert resolve_engine(connect_spark, "delta", "auto") == "native"
    assert not connect_has_format(connect_spark, "no_such_format")
    assert default_parallelism(connect_spark) == 2


def test_warehouse_run_remote_runs_on_the_connect_server(
    connect_server, broker, unique, tmp_path: Path
) -> None:
    """`warehouse run --remote sc://...` in a process that starts no Spark of its own: the
    engines resolve on the server (`auto`: native there)."""
    topic = unique("orders")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce(broker.bootstrap, topic, [("a", order("o1", "u1", 10.5, 0)), ("x", "not json")])
    root = write_project(tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, dwd=False)

    done = cli(root, "-v", "run", "--once", "--remote", connect_server.url)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "kafka engine: native" in done.stderr
    assert "ods_orders [ods]: 1 batch(es), 2 rows in, 1 written, 1 quarantined" in done.stdout
    project = Project.load(root)
    assert rows(project.table_path("ods_orders"), ["order_id", "_offset"]) == [("o1", 0)]
    assert rows(project.quarantine_path("ods_orders"), ["source_offset"]) == [(1,)]


def test_native_optimize_and_vacuum_on_a_connect_session(
    connect_spark, connect_mode, tmp_path: Path
) -> None:
    """OPTIMIZE and VACUUM in SQL on the server (delta-spark's Python API there would need
    Delta's Connect plugin); rows and the writer's record of its batches stay."""
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", engine="native")
    for b in range(2):
        batch = connect_spark.createDataFrame([(b * 10 + i,) for i in range(3)], "id long")
        write_batch(batch, b, target)
    files_before = open_table(target.path).get_add_actions().num_rows
    metrics = delta_engine("native").optimize(connect_spark, target.path)
    assert metrics["numFilesRemoved"] == files_before > 1
    deleted = delta_engine("native").vacuum(connect_spark, target.path, 0, force=True)
    assert len(deleted) == files_before
    assert rows(Path(target.path), ["id"]) == [(0,), (1,), (2,), (10,), (11,), (12,)]
    assert write_batch(connect_spark.createDataFrame([(10,)], "id long"), 1, target) is None


def test_a_continuous_run_on_a_connect_session_stops_when_asked(
    connect_spark, connect_mode, broker, unique, tmp_path: Path, engine: str
) -> None:
    """`run(once=False)`: records produced while it runs reach the table; `request_stop`
    stops the queries on the server and the run returns."""
    topic = unique("orders")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    root = write_project(
        tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, dwd=False, engine=engine
    )
    project = Project.load(root)
    pipeline = project.pipeline(connect_spark)
    results: list[object] = []
    runner = threading.Thread(target=lambda: results.extend(pipeline.run(once=False)))

    def landed() -> list[tuple[object, ...]]:
        try:
            return rows(project.table_path("ods_orders"), ["order_id"])
        except (TableNotFoundError, FileNotFoundError):
            return []

    runner.start()
    try:
        produce(broker.bootstrap, topic, [("a", order("o1", "u1", 10.5, 0))])
        deadline = time.monotonic() + 240
        while landed() != [("o1",)] and runner.is_alive() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        pipeline.request_stop()
        runner.join(timeout=180)
    assert not runner.is_alive()
    assert landed() == [("o1",)]
    assert [r.table for r in results] == ["ods_orders"]  # type: ignore[attr-defined]
    assert not [q for q in connect_spark.streams.active if q.name == "warehouse_ods_orders"]
