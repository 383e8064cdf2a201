"""Tables by name (`catalog:`): after a run every table and quarantine is registered in
the session's catalog and reads by name with exactly its rows; a SQL transform names its
snapshot by the catalog name; `plan` and `status` show the names; `reset` drops them.

On both engines, on the shared classic `spark` (whose session catalog is Spark's
in-memory one), in schemas of its own; on a Spark Connect session the layers of
`test_connect` run with `catalog:` set and read by name. The Hive metastore the CLI's
sessions keep under the warehouse root is `test_the_names_outlive_the_process`.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import Row

from streams.kafka.admin import ensure_topic, produce
from tests.integration.runtime.helpers import order
from tests.integration.runtime.test_cli_e2e import cli
from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.compile.plan import build_plan, render_text
from warehouse.runtime.recover import reset
from warehouse.runtime.status import render_status, status

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

CONFIRMED_SQL = """\
SELECT o.order_id, o.amount
FROM source o JOIN {dwd_orders} d ON o.order_id = d.order_id
"""


def _project(root: Path, *, topic: str, bootstrap: str, engine: str, schema: str) -> Project:
    """The orders project (ODS with quarantine, DWD) with `catalog:` set, and a DWS table
    whose SQL reads `dwd_orders` as a snapshot by its three-part name."""
    write_project(
        root,
        topic=topic,
        bootstrap=bootstrap,
        engine=engine,
        extra_conf=f'catalog: {{schema: "{schema}"}}\n',
    )
    dwd = f"spark_catalog.{schema.replace('{layer}', 'dwd')}.dwd_orders"
    (root / "layers" / "dws").mkdir()
    (root / "layers" / "dws" / "confirmed.yml").write_text(
        "table: dws_confirmed\nsource: {table: ods_orders}\ntransform:\n  sql: |\n"
        + "".join(f"    {line}\n" for line in CONFIRMED_SQL.format(dwd_orders=dwd).splitlines())
        + "sink: {mode: append}\n"
    )
    return Project.load(root)


def _produce(bootstrap: str, topic: str) -> None:
    ensure_topic(bootstrap, topic, partitions=1)
    produce(
        bootstrap,
        topic,
        [
            ("a", order("o1", "u1", 10.5, 0)),
            ("b", order("o2", "u2", 20.0, 1)),
            ("x", "not json"),  # parse error: quarantined
            ("c", order("o3", "u3", -1.0, 2)),  # filtered by the DWD SQL
        ],
    )


def _rows(session, name: str, columns: list[str]) -> list[Row]:
    return sorted(session.table(name).select(*columns).collect())


def test_every_table_reads_by_name_after_a_run(
    spark, broker, unique, tmp_path: Path, engine: str
) -> None:
    session = spark
    topic, tag = unique("orders"), uuid.uuid4().hex[:8]
    _produce(broker.bootstrap, topic)
    project = _project(
        tmp_path / "proj",
        topic=topic,
        bootstrap=broker.bootstrap,
        engine=engine,
        schema=f"{{layer}}_{tag}",
    )
    ods, dwd, dws = f"ods_{tag}", f"dwd_{tag}", f"dws_{tag}"

    results = {r.table: r for r in project.pipeline(session).run(once=True)}

    assert {n: r.skipped for n, r in results.items()} == {
        "ods_orders": None,
        "dwd_orders": None,
        "dws_confirmed": None,
    }
    assert _rows(session, f"{ods}.ods_orders", ["order_id", "amount", "_offset"]) == [
        Row(order_id="o1", amount=10.5, _offset=0),
        Row(order_id="o2", amount=20.0, _offset=1),
        Row(order_id="o3", amount=-1.0, _offset=3),
    ]
    assert _rows(session, f"spark_catalog.{ods}.ods_orders__quarantine", ["source_offset"]) == [
        Row(source_offset=2)
    ]
    assert _rows(session, f"{dwd}.dwd_orders", ["order_id", "amount"]) == [
        Row(order_id="o1", amount=Decimal("10.50")),
        Row(order_id="o2", amount=Decimal("20.00")),
    ]
    assert _rows(session, f"{dws}.dws_confirmed", ["order_id", "amount"]) == [
        Row(order_id="o1", amount=10.5),
        Row(order_id="o2", amount=20.0),
    ]
    # No quarantined row, no quarantine table: nothing to name.
    assert not session.catalog.tableExists(f"{dwd}.dwd_orders__quarantine")

    plan = render_text(build_plan(project))
    assert f"name:        spark_catalog.{dws}.dws_confirmed" in plan
    assert f"(quarantine: spark_catalog.{ods}.ods_orders__quarantine)" in plan
    rows = {r["table"]: r for r in status(project, resolve=False)}
    assert rows["dwd_orders"]["name"] == f"spark_catalog.{dwd}.dwd_orders"
    assert f"(spark_catalog.{ods}.ods_orders)" in render_status(list(rows.values()))

    reset(project, "ods_orders", spark=session)

    assert not session.catalog.tableExists(f"{ods}.ods_orders")
    assert not session.catalog.tableExists(f"{ods}.ods_orders__quarantine")
    assert session.catalog.tableExists(f"{dwd}.dwd_orders")  # only the table reset


def test_the_names_outlive_the_process(spark, broker, unique, tmp_path: Path) -> None:
    """The CLI's sessions keep Spark's session catalog in a Hive metastore (Derby) under
    the warehouse root: what `run` registered, the next process reads by name, and
    `reset` in a third drops it. While another process holds that metastore (here this
    test's own JVM, booting the database as a continuous `run` holds it), a run stops
    before it reads or writes anything, saying which process kind holds what."""
    topic = unique("orders")
    _produce(broker.bootstrap, topic)
    root = write_project(
        tmp_path / "proj",
        topic=topic,
        bootstrap=broker.bootstrap,
        dwd=False,
        extra_conf='catalog: {schema: "{layer}"}\n',
    )

    done = cli(root, "run", "--once")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / ".warehouse" / "_catalog" / "metastore_db").is_dir()
    assert (root / ".warehouse" / "_catalog" / "derby.log").is_file()

    produce(broker.bootstrap, topic, [("d", order("o4", "u4", 4.0, 3))])
    database = root / ".warehouse" / "_catalog" / "metastore_db"
    ods = Project.load(root).table_path("ods_orders")
    versions = sorted(p.name for p in (Path(ods) / "_delta_log").glob("*.json"))
    manager = spark._jvm.java.sql.DriverManager
    held = manager.getConnection(f"jdbc:derby:{database}")
    try:
        done = cli(root, "run", "--once")
    finally:
        held.close()
        _shut_down(manager, database)
    assert done.returncode == 2, done.stdout + done.stderr
    holder = spark._jvm.ProcessHandle.current().pid()
    assert (
        f"error: conf/local.yml: `catalog`: the Hive metastore that keeps the tables' names "
        f"({database}) is in use by another process (pid {holder})."
    ) in done.stderr
    assert "XSDB6" not in done.stderr  # stopped before Hive's client tried the database
    assert "spark.hadoop.hive.metastore.uris" in done.stderr
    assert "ods_orders [ods]" not in done.stdout  # no query started
    assert sorted(p.name for p in (Path(ods) / "_delta_log").glob("*.json")) == versions

    done = cli(root, "reset", "--table", "ods_orders", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "removed spark_catalog.ods.ods_orders, spark_catalog.ods.ods_orders__quarantine, " in (
        done.stdout
    )


def _shut_down(manager, database: Path) -> None:
    """Shut the embedded Derby database down, releasing it for other processes (Derby
    answers a shutdown with an SQLException, XJ015/08006, by design)."""
    from py4j.protocol import Py4JJavaError

    try:
        manager.getConnection(f"jdbc:derby:{database};shutdown=true")
    except Py4JJavaError as e:
        assert "08006" in str(e.java_exception.getSQLState()), e


_WITHOUT_DELTA = """
import sys
from warehouse import Project
from warehouse.runtime.errors import CatalogError
from warehouse.runtime.session import get_session
from warehouse.spec.config import SparkSettings

spark = get_session(SparkSettings(master="local[1]", native_jars=False))
try:
    Project.load(sys.argv[1]).pipeline(spark).run(once=True)
except CatalogError as e:
    print("refused:", e, "exit", e.exit_code)
spark.stop()
"""


def test_a_session_that_cannot_read_delta_refuses_the_run(tmp_path: Path) -> None:
    """Without delta-spark Spark can neither register nor read a Delta table by name: the
    run stops before any query (so before any broker is asked), naming `catalog`."""
    root = write_project(
        tmp_path / "proj",
        bootstrap="127.0.0.1:1",
        dwd=False,
        engine="python",
        extra_conf='catalog: {schema: "{layer}"}\n',
    )
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_DELTA, str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused: conf/local.yml: `catalog` registers the tables" in done.stdout
    assert "or remove `catalog`" in done.stdout and done.stdout.rstrip().endswith("exit 2")
    assert not (root / ".warehouse" / "tables" / "ods_orders").exists()
