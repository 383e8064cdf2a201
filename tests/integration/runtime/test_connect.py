"""A notebook on a Spark Connect session (Databricks serverless, standard access mode,
`pyspark-client`): `Project.load(...).pipeline(spark).run(once=True)` on both engines,
against the real Connect server pyspark ships (`connect_server`).

The batches run in the server's Python worker (`warehouse.runtime.remote`), so what is
checked is what a user sees: the tables' rows, read with delta-rs, and the run's result.
The same tables on a classic session are `test_pipeline`'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from deltalake.exceptions import TableNotFoundError

from streams.delta import DeltaTarget, delta_engine, write_batch
from streams.delta.tables import open_table
from streams.kafka.admin import ensure_topic, produce
from streams.landing import landing_blocker
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


def produce_orders_and_users(bootstrap: str, orders: str, users: str) -> None:
    """The records `check_the_layers` expects, into two new topics."""
    for topic in (orders, users):
        ensure_topic(bootstrap, topic, partitions=1)
    produce(
        bootstrap,
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
        bootstrap,
        users,
        [
            ('{"user_id": "u1"}', '{"user_id": "u1", "city": "Paris"}'),
            ('{"user_id": "u2"}', '{"user_id": "u2", "city": "Oslo"}'),
            ('{"user_id": "u1"}', '{"user_id": "u1", "city": "Rome"}'),
        ],
    )


def check_the_layers(
    project: Project,
    results: Mapping[str, Any],
    by_name: Mapping[str, list[tuple[object, ...]]],
    bootstrap: str,
    orders: str,
) -> None:
    """The tables of `_project` after one run over `produce_orders_and_users`' records:
    their rows (read with delta-rs), the run's `results` by table, the dead letters, and
    `by_name`: each table's and the quarantine's `user_id`s (`source_offset`s) as
    `spark.table` read them by catalog name (key: table name)."""
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
    assert sorted(r.value for r in read_topic(bootstrap, f"{orders}.dlq")) == sorted(
        [b"not json", order(None, "u9", 5.0, 1).encode()]
    )
    assert results["dim_users"].dead_letters is None
    assert results["dwd_orders"].rows_written == 2
    assert results["dim_users_history"].rows_read == 3
    assert all(r.version is not None for r in results.values())
    # By name in the session's catalog (tests/integration/runtime/test_catalog.py has
    # more), each with the rows read above from its path.
    for name in ("ods_orders", "dwd_orders", "dim_users", "dim_users_history"):
        assert sorted(by_name[name]) == rows(project.table_path(name), ["user_id"]), name
    assert sorted(by_name["ods_orders__quarantine"]) == [(3,), (4,)]


def read_by_name(spark: Any, project: Project, schema: str) -> dict[str, list[tuple[object, ...]]]:
    """`check_the_layers`' `by_name`, read by `spark.table` with `{layer}` of `schema`."""
    out = {
        name: [
            (r.user_id,) for r in spark.table(f"{schema.format(layer=t.layer)}.{name}").collect()
        ]
        for name, t in project.tables.items()
    }
    quarantine = spark.table(f"{schema.format(layer='ods')}.ods_orders__quarantine")
    out["ods_orders__quarantine"] = [(r.source_offset,) for r in quarantine.collect()]
    return out


def _orders_and_users(
    tmp_path: Path, bootstrap: str, unique: Any, engine: str, schema: str
) -> tuple[Project, str]:
    """`_project` in `tmp_path / "proj"` over new topics holding `produce_orders_and_users`'
    records; the project and its orders topic."""
    orders, users = unique("orders"), unique("users")
    produce_orders_and_users(bootstrap, orders, users)
    project = _project(
        tmp_path / "proj",
        orders=orders,
        users=users,
        bootstrap=bootstrap,
        engine=engine,
        schema=schema,
    )
    return project, orders


def worker_releases(server: Any) -> int:
    """The batch DataFrames the server was asked to drop from its cache (in its log): by a
    `foreachBatch` worker, which `leave_release_to_the_server` keeps from asking (the
    server drops each itself once the batch returns)."""
    return server.log.read_text(errors="replace").count(
        "SparkConnectPlanner: Removing DataFrame with id"
    )


def test_a_connect_session_runs_the_layers_on_the_server(
    connect_server, connect_spark, connect_mode, broker, unique, tmp_path: Path, engine: str
) -> None:
    schema = "{layer}_" + uuid.uuid4().hex[:8]  # the server's catalog outlives the test
    project, orders = _orders_and_users(tmp_path, broker.bootstrap, unique, engine, schema)
    released = worker_releases(connect_server)

    results = {r.table: r for r in project.pipeline(connect_spark).run(once=True)}

    by_name = read_by_name(connect_spark, project, schema)
    check_the_layers(project, results, by_name, broker.bootstrap, orders)
    assert worker_releases(connect_server) == released


def test_a_connect_session_keeps_landing_tables_on_sparks_path(
    connect_spark, connect_mode, tmp_path: Path
) -> None:
    """Its batches run in the server's workers, with no SparkContext for the Arrow
    landing path's tasks, though the server's master is `local[2]` and the table local."""
    assert connect_spark.conf.get("spark.master") == "local[2]"
    reason = landing_blocker(connect_spark, str(tmp_path / "ods_orders"))
    assert reason is not None and "Spark Connect session has no SparkContext" in reason, reason


def test_engine_resolution_asks_the_connect_server(connect_spark) -> None:
    assert is_connect(connect_spark)
    assert resolve_engine(connect_spark, "kafka", "auto") == "native"
    assert resolve_engine(connect_spark, "delta", "auto") == "native"
    assert not connect_has_format(connect_spark, "no_such_format")
    assert default_parallelism(connect_spark) == 2


@pytest.mark.parametrize("where", ["server", "local[2]"])
def test_warehouse_run_remote_runs_on_the_connect_server(
    request: pytest.FixtureRequest, where: str, broker, unique, tmp_path: Path
) -> None:
    """`warehouse run --remote sc://...` in a process that starts no Spark of its own: the
    engines resolve on the server (`auto`: native there). `--remote local[2]`: the
    server pyspark starts in the CLI's process, set up by `local_connect_conf` (the
    native jars cached by `make install` on it)."""
    remote = request.getfixturevalue("connect_server").url if where == "server" else where
    topic = unique("orders")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce(broker.bootstrap, topic, [("a", order("o1", "u1", 10.5, 0)), ("x", "not json")])
    root = write_project(tmp_path / "proj", topic=topic, bootstrap=broker.bootstrap, dwd=False)

    done = cli(root, "-v", "run", "--once", "--remote", remote)

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


@pytest.mark.parametrize("engine", ["python", "native"])
def test_an_aggregates_upsert_on_a_connect_session(
    connect_spark, connect_mode, tmp_path: Path, engine: str
) -> None:
    """An upsert said to hold one change per key (an aggregate's, decisions/0073) through a
    Connect session: the python engine collects it as it is and checks it on the driver,
    the native one (to which a Connect batch's size is unknown) dedupes it on the server;
    a batch that repeats a key anyway keeps its later change either way."""
    target = DeltaTarget(
        str(tmp_path / "t"),
        mode="upsert",
        keys=["city"],
        sequence_by="seq",
        app_id="a:q",
        engine=engine,
        one_change_per_key=True,
    )
    schema = "city string, seq long, gmv double"
    write_batch(
        connect_spark.createDataFrame([("oslo", 1, 1.0), ("rome", 1, 2.0)], schema), 0, target
    )
    write_batch(
        connect_spark.createDataFrame([("oslo", 3, 5.0), ("oslo", 2, 4.0)], schema), 1, target
    )
    assert rows(Path(target.path), ["city", "seq", "gmv"]) == [("oslo", 3, 5.0), ("rome", 1, 2.0)]


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


NOTEBOOK = Path(__file__).with_name("notebook_child.py")
ROOT = Path(__file__).resolve().parents[3]


def test_a_notebook_on_a_local_connect_server_runs_the_layers(
    broker, unique, tmp_path: Path, engine: str
) -> None:
    """The Done-when of Spark Connect support: a notebook's
    `SparkSession.builder.remote("local[2]")` with `local_connect_conf()` (the native jars
    on the server, which the catalog's registration needs on either engine) runs the
    project once on the server pyspark starts in the notebook's process; the tables have
    exactly the rows of the shared Connect server's test, and `spark.table` reads each by
    name. The notebook's environment names no SPARK_HOME or PYSPARK_PYTHON, as a user's
    need not."""
    project, orders = _orders_and_users(tmp_path, broker.bootstrap, unique, engine, "{layer}")
    out = tmp_path / "notebook.json"
    unset = {"SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_REMOTE"}
    env = {k: v for k, v in os.environ.items() if k not in unset and "SPARK_CONNECT" not in k}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)

    done = subprocess.run(
        [sys.executable, str(NOTEBOOK), str(tmp_path / "proj"), str(out)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1000,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    notebook = json.loads(out.read_text())
    assert notebook["connect"].startswith("pyspark.sql.connect")
    results = {name: SimpleNamespace(**r) for name, r in notebook["results"].items()}
    by_name = {name: [tuple(r) for r in v] for name, v in notebook["by_name"].items()}
    check_the_layers(project, results, by_name, broker.bootstrap, orders)
