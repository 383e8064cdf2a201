"""`spark-submit warehouse/submit.py` against a real Spark standalone cluster.

The test process's cluster (`cluster` of conftest.py: a master and two workers, 1 core
and 1g each, from the installed pyspark on 127.0.0.1, shared with the cluster shape's
tests); the driver runs in client mode, the tasks in two executor JVMs with
their own Python workers (the Kafka source's `read()` and the Delta sink's
Parquet writes run there). The project uses the repository's own
`conf/cluster.yml`: bootstrap and SASL credentials come from environment
variables, and the broker (a real `streams.broker` process) requires SASL/PLAIN.
ODS, then DWD, each its own `spark-submit`; the Delta tables are read back with
delta-rs and compared exactly.

ODS runs with `spark.pyspark.python` = this venv's interpreter (the executors are
on this machine). DWD runs the documented bundle route instead: the environment
archive of `warehouse bundle` shipped with `--archives env.tar.gz#env` and
`spark.pyspark.python=./env/bin/python`. The archive leaves pyspark out: Python
workers get Spark's own `$SPARK_HOME/python/lib/pyspark.zip` first on their path
(the test cluster's carries its modules' byte code beside them: compiled_home.py).
In client mode the driver JVM also starts Python workers with
`spark.pyspark.python` (the Python data sources plan their reads there), so the
same archive is unpacked as `env` in the driver's working directory.

It runs on both engines: `python` submits with no extra jars (`engines: auto` finds
none and picks the Python data sources); `native` submits the cached native jars with
`--conf spark.jars=...` and Delta's extension, as a cluster user passes `--packages`,
and `auto` picks Spark's `kafka` format and delta-spark.

The drivers and executors map the class archives of the cluster's warm-up application
(`class_archives.py`, docs/decisions/0054), and so carry its class path, Hadoop's S3
connector, which nothing here uses.
"""

from __future__ import annotations

import shutil
import tarfile
from decimal import Decimal
from pathlib import Path

import pytest

from streams.kafka.admin import ensure_topic, produce
from tests.integration.cluster.class_archives import ClusterArchives, archive_conf
from tests.integration.cluster.jobs import REPO, conf_args, engine_args, failure, submit
from tests.integration.cluster.standalone import StandaloneCluster
from tests.integration.runtime.helpers import at, order, rows
from tests.unit.runtime.projects import write_project

# Two applications of three JVMs each and a bundle build: minutes on a busy two-core
# machine, so more than the suite's default 600 s limit.
pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(1800)]

USER, PASSWORD = "warehouse", "s3cret-pw"
SASL = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": USER,
    "sasl.password": PASSWORD,
}


def test_ods_then_dwd_on_a_standalone_cluster(
    cluster: StandaloneCluster,
    cluster_archives: ClusterArchives | None,
    broker_factory,
    unique,
    env_bundle,
    tmp_path: Path,
    engine: str,
) -> None:
    broker = broker_factory(**{"sasl.users": f"{USER}:{PASSWORD}"})
    topic = unique("orders")
    ensure_topic(broker.bootstrap, topic, partitions=2, client_config=SASL)
    records = [
        ("a", order("o1", "u1", 10.5, 0)),
        ("b", order("o2", "u2", 20.0, 1)),
        ("a", order("o1", "u1", 10.5, 0)),  # duplicate: kept by ODS, deduplicated by DWD
        ("c", order("o3", "u3", -1.0, 2)),  # negative: filtered by DWD
        ("x", "{not json"),  # quarantined by ODS
        ("d", order(None, "u4", 5.0, 3)),  # null order_id: quarantined by ODS
    ]
    for partition in (0, 1):
        produce(
            broker.bootstrap, topic, records[partition::2], partition=partition, client_config=SASL
        )

    project = write_project(tmp_path / "proj", topic=topic)
    shutil.copy(REPO / "conf" / "cluster.yml", project / "conf" / "cluster.yml")
    root = tmp_path / "warehouse-root"
    env = {
        **cluster.env,
        "WAREHOUSE_ROOT": str(root),
        "KAFKA_BOOTSTRAP": broker.bootstrap,
        "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KAFKA_SASL_MECHANISM": "PLAIN",
        "KAFKA_USERNAME": USER,
        "KAFKA_PASSWORD": PASSWORD,
    }
    with tarfile.open(env_bundle.path) as tar:
        tar.extractall(project / "env", filter="tar")  # the driver's ./env (cwd = project)
    before = set(cluster.executor_dirs())  # the other tests' applications on the cluster
    extra = [*engine_args(engine), *conf_args(archive_conf(cluster_archives))]
    ods_run = submit(cluster, project, "ods", env, *extra)
    assert ods_run.returncode == 0, failure(ods_run)
    # Listed right after each application ends: a worker removes a stopped application's
    # folder a little later (the cluster's `spark.worker.cleanup`).
    ods_executors = [p for p in cluster.executor_dirs() if p not in before]
    assert sorted(p.parent.parent.name for p in ods_executors) == ["worker-0", "worker-1"]
    assert not any((d / "env").exists() for d in ods_executors)
    dwd_run = submit(
        cluster,
        project,
        "dwd",
        env,
        *extra,
        "--archives",
        f"{env_bundle.path}#env",
        executor_python="./env/bin/python",
    )
    assert dwd_run.returncode == 0, failure(dwd_run)
    dwd_executors = [p for p in cluster.executor_dirs() if p not in before | set(ods_executors)]

    assert "ods_orders [ods]: 1 batch(es), 6 rows in, 4 written, 2 quarantined" in ods_run.stdout
    # Two applications, each with one executor JVM on each of the two workers; the DWD
    # executors unpacked the archive and ran their Python workers from it.
    assert sorted(p.parent.parent.name for p in dwd_executors) == ["worker-0", "worker-1"]
    for d in dwd_executors:
        assert (d / "env" / "lib").is_dir(), sorted(x.name for x in d.iterdir())

    tables = root / "tables"
    assert rows(
        tables / "ods_orders", ["order_id", "user_id", "amount", "event_time", "_partition"]
    ) == [
        ("o1", "u1", 10.5, at(0), 0),
        ("o1", "u1", 10.5, at(0), 0),
        ("o2", "u2", 20.0, at(1), 1),
        ("o3", "u3", -1.0, at(2), 1),
    ]
    assert rows(tables / "ods_orders", ["_topic", "_partition", "_offset"]) == [
        (topic, 0, 0),
        (topic, 0, 1),
        (topic, 1, 0),
        (topic, 1, 1),
    ]
    assert rows(tables / "ods_orders__quarantine", ["source_partition", "source_offset"]) == [
        (0, 2),
        (1, 2),
    ]
    assert rows(tables / "dwd_orders", ["order_id", "user_id", "amount", "event_time"]) == [
        ("o1", "u1", Decimal("10.50"), at(0)),
        ("o2", "u2", Decimal("20.00"), at(1)),
    ]
