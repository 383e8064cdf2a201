"""The cluster shape on one machine: the bundled example's twelve tables through
`spark-submit warehouse/submit.py --layer L`, one application per layer, on a Spark
standalone master with two workers, the tables on an S3-API server and the topics on a
three-node Apache Kafka cluster; every table read back with delta-rs equals the
independent computation of tests/integration/demo/expected.py.

As on a cluster whose machines have instance credentials, the standard AWS variables are
in the environment of the workers' daemons (which their executors inherit) and of the
driver, and nowhere else: never on a command line, and the test checks that no log of the
driver, the daemons or the executors holds the secret key. What is not a secret is passed
as a cluster user passes it (docs/cluster.md): the endpoint and path-style addressing as
`spark.hadoop.fs.s3a.*`, the repository's `conf/cluster.yml` with `WAREHOUSE_ROOT` and
`KAFKA_BOOTSTRAP` set. Hadoop's S3 connector and its AWS SDK bundle (about 700 MB) are
on the driver's and the executors' class path (`extraClassPath`), jars every node already
has, as on EMR or Dataproc, so no executor copies them.

The events are produced once per module (300 events, as the example's fast runs) and
each engine reads them from the start into a bucket of its own. `python` submits no
engine jars, so `engines: auto` picks the Python data sources, whose reads and Parquet
writes run in the executors' Python workers against S3; `native` adds Spark's Kafka
connector and delta-spark. On both, the ODS tables land through Arrow in the executors'
tasks (`streams.landing`), which the driver's log says batch by batch. Each application's
driver and executors map the class archives the warm-up application of
tests/integration/cluster/class_archives.py wrote for this cluster (docs/decisions/0054).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.kafka.admin import end_offsets
from tests.integration.cluster.class_archives import ClusterArchives, archive_conf
from tests.integration.cluster.jobs import (
    REPO,
    conf_args,
    engine_conf,
    failure,
    storage_conf,
    submit,
)
from tests.integration.cluster.standalone import StandaloneCluster
from tests.integration.demo.expected import Expected, compute
from tests.integration.demo.tables import assert_sources, assert_tables, ods_coordinates, rows
from tests.support.apache_kafka import ApacheKafka
from warehouse.generate import TOPICS, generate
from warehouse.generate.produce import ensure_topics, produce_records

# A cluster of three daemons and four applications of three JVMs each per engine, beside
# three Kafka nodes and the S3 server: minutes on a busy two-core machine.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.kafka,
    pytest.mark.s3,
    pytest.mark.slow,
    pytest.mark.timeout(2400),
]

EVENTS, SEED = 300, 11
LAYERS = ("ods", "dwd", "dws", "ads")
ARROW_TABLES = ("ods_orders", "ods_payments", "ods_page_views")
"""The example's tables on the Arrow landing path: Kafka JSON appended."""
SYSTEM_PYTHON = "/usr/bin/python3"
"""A Python of the pyspark's version without the framework's dependencies (Debian's)."""


@pytest.fixture(scope="module")
def example(apache_kafka_cluster: ApacheKafka) -> tuple[Expected, dict[str, dict[int, int]]]:
    """The example's events on the Kafka cluster, produced once (acks=all): their expected
    tables, and each topic's end offsets."""
    bootstrap = apache_kafka_cluster.bootstrap
    ensure_topics(bootstrap)
    records = generate(EVENTS, seed=SEED)
    produce_records(bootstrap, records, client_config={"acks": "all"})
    return compute(records), {t: end_offsets(bootstrap, t)[t] for t in TOPICS}


def logs(cluster: StandaloneCluster) -> Iterator[Path]:
    """Every log the daemons and the executors wrote."""
    for p in cluster.base.rglob("*"):
        if p.is_file() and (p.name in ("stdout", "stderr") or p.suffix in (".out", ".log")):
            yield p


def test_example_on_workers_s3_and_three_kafka_nodes(
    cluster: StandaloneCluster,
    cluster_archives: ClusterArchives | None,
    apache_kafka_cluster: ApacheKafka,
    example: tuple[Expected, dict[str, dict[int, int]]],
    s3_root: str,
    engine: str,
    tmp_path: Path,
) -> None:
    exp, ends = example
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    # The daemons got the AWS variables from this process's environment, as the workers
    # of a cluster with instance credentials have them; the driver gets them the same way.
    assert cluster.env["AWS_SECRET_ACCESS_KEY"] == secret
    env = {
        **{k: v for k, v in cluster.env.items() if not k.startswith("WAREHOUSE")},
        "WAREHOUSE_ROOT": s3_root,
        "KAFKA_BOOTSTRAP": apache_kafka_cluster.bootstrap,
        "KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
    }
    extra = conf_args({**engine_conf(engine), **storage_conf(), **archive_conf(cluster_archives)})
    runs: dict[str, subprocess.CompletedProcess[str]] = {}
    for layer in LAYERS:
        before = set(cluster.executor_dirs())
        run = submit(cluster, REPO, layer, env, *extra, cwd=tmp_path, verbose=True)
        assert run.returncode == 0, f"{layer}: {failure(run)}"
        assert secret not in " ".join(run.args)
        runs[layer] = run
        # Each application ran one executor on each worker.
        executors = [p for p in cluster.executor_dirs() if p not in before]
        assert sorted(p.parent.parent.name for p in executors) == ["worker-0", "worker-1"]

    # `engines: auto` chose the engine the job's jars allow (the driver's Python logs to
    # spark-submit's standard output, which merges its standard error).
    for kind in ("kafka", "delta"):
        assert f"{kind} engine: {engine} (`auto`" in runs["ods"].stdout, runs["ods"].stdout[-3000:]
    out = "\n".join(r.stdout for r in runs.values())
    for name in ("ods_orders", "ods_payments", "ods_page_views", "dim_users", "dim_products"):
        assert f"{name} [" in out, out
    # The ODS tables, with their quarantining expectations, land through Arrow in the
    # executors' tasks on both engines: the native ones' probe found the tasks importing
    # the path and writing under the tables on S3.
    ods = runs["ods"].stdout
    assert "not on the Arrow landing path" not in ods, ods[-3000:]
    for name in ARROW_TABLES:
        assert re.search(rf"table {name}: batch \d+ \(Arrow\): ", ods), ods[-3000:]
    assert_sources(s3_root, exp, ends)
    assert_tables(s3_root, exp)
    assert not any(tmp_path.iterdir()), sorted(tmp_path.iterdir())  # nothing on local disk

    for run in runs.values():
        assert secret not in run.stdout + run.stderr
    leaked = [str(p) for p in logs(cluster) if secret in p.read_text(errors="replace")]
    assert leaked == []


@pytest.mark.usefixtures("native_jars")
def test_executors_without_the_framework_keep_spark_path(
    cluster: StandaloneCluster,
    cluster_archives: ClusterArchives | None,
    apache_kafka_cluster: ApacheKafka,
    example: tuple[Expected, dict[str, dict[int, int]]],
    s3_root: str,
    tmp_path: Path,
) -> None:
    """The ODS layer on the native engines with executors whose Python lacks the
    framework's dependencies (the machines' own `python3`, without pyarrow): the probe's
    tasks fail, each ODS table stays on Spark's path with the reason at WARNING, and the
    tables still hold every record of their topics exactly once."""
    exp, ends = example
    env = {
        **{k: v for k, v in cluster.env.items() if not k.startswith("WAREHOUSE")},
        "WAREHOUSE_ROOT": s3_root,
        "KAFKA_BOOTSTRAP": apache_kafka_cluster.bootstrap,
        "KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
    }
    extra = conf_args({**engine_conf("native"), **storage_conf(), **archive_conf(cluster_archives)})
    run = submit(
        cluster,
        REPO,
        "ods",
        env,
        *extra,
        executor_python=SYSTEM_PYTHON,
        cwd=tmp_path,
        verbose=True,
    )
    assert run.returncode == 0, failure(run)
    for name in ARROW_TABLES:
        assert re.search(
            rf"WARNING .*table {name}: not on the Arrow landing path, as Spark's tasks cannot "
            r"run it \(ModuleNotFoundError: No module named '\w+'\)",
            run.stdout,
        ), run.stdout[-3000:]
        assert re.search(rf"table {name}: batch \d+ \(one pass\): ", run.stdout), run.stdout
    assert "(Arrow)" not in run.stdout
    for topic in ("orders", "payments", "page_views"):
        assert ods_coordinates(s3_root, topic) == {
            (p, o): 1 for p, end in ends[topic].items() for o in range(end)
        }, topic
    quarantined = {t: len(rows(s3_root, f"{t}__quarantine")) for t in exp.quarantined}
    assert quarantined == exp.quarantined
