"""Class archives (Java's application class-data sharing) for the JVMs of the test
cluster's applications: their drivers and the executors the workers launch.

A crash test's life on the cluster, and each application of the example's and the
standalone test, is a driver JVM and two executor JVMs started anew; each parses and
verifies Spark's classes from the jars before its first batch. The
archive `warehouse jars fetch` makes serves local sessions only: Java maps an archive
only for the class path it was made with, and a cluster application's class path holds
the cluster's configuration folder (a folder of this test run) and Hadoop's S3
connector. So a warm-up application on the cluster makes a pair for this run: its
driver and its one executor each write one (`jcmd <pid> VM.cds dynamic_dump`).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.integration.cluster.jobs import REPO, application_conf, storage_class_path
from tests.integration.cluster.standalone import StandaloneCluster
from warehouse.runtime.class_archive import JAVA_FLAGS, maps_whole
from warehouse.runtime.spark_home import launch_java

logger = logging.getLogger(__name__)

_WARM_UP = """
import os, subprocess, sys
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from tests.integration.cluster.executors import executor_pids

jcmd, dest, master = sys.argv[1:4]
builder = SparkSession.builder.master(master).appName("class-archive-warm-up")
for kv in sys.argv[4:]:
    k, v = kv.split("=", 1)
    builder = builder.config(k, v)
spark = builder.getOrCreate()
df = spark.range(10000).select(
    F.col("id"), F.to_json(F.struct(F.col("id").alias("i"))).alias("v")
)
df.select(F.get_json_object("v", "$.i").cast("long").alias("i")).groupBy(
    (F.col("i") % 7).alias("k")
).count().collect()
spark.sparkContext.parallelize(range(100), 2).map(lambda x: x * 2).sum()
executors = executor_pids(spark.sparkContext.applicationId)
assert len(executors) == 1, executors
jvm = spark.sparkContext._gateway.proc
for pid, name in ((executors[0], "executor.jsa"), (jvm.pid, "driver.jsa")):
    subprocess.run([jcmd, str(pid), "VM.cds", "dynamic_dump", os.path.join(dest, name)],
                   check=True, capture_output=True, timeout=300)
spark.stop()
"""
"""A shuffle, JSON functions and a Python task: the paths every crash-test life runs;
then each JVM writes its archive while it runs (`jcmd VM.cds dynamic_dump`), not at its
exit: at an application's end the worker gives its executors 10 s before SIGKILL, and a
dump on this machine's loaded cores took longer."""


@dataclass(frozen=True)
class ClusterArchives:
    """The archives of one warm-up application: a JVM maps one only with the class path
    it was made with (the cluster's configuration folder, Hadoop's S3 connector, Spark's
    jars), and loads its classes from the jars otherwise."""

    driver: Path
    executor: Path


def java_options(archive: Path) -> str:
    """The Java options that map `archive`, its notes kept off the JVM's standard output."""
    return " ".join([f"-XX:SharedArchiveFile={archive}", *JAVA_FLAGS])


def archive_conf(
    archives: ClusterArchives | None, *, driver_flags: tuple[str, ...] = ()
) -> dict[str, str]:
    """The settings that make an application's driver (with `driver_flags` before) and
    executors map `archives`; none when there are none. A driver or executor start on
    the cluster parses and verifies Spark's classes anew without them
    (docs/decisions/0054). Java maps an archive only with the class path it was made
    with, so they carry the warm-up's (`storage_class_path`): an application that sets
    another loses the archives silently."""
    if archives is None:
        return {}
    return {
        **storage_class_path(),
        "spark.driver.extraJavaOptions": " ".join([*driver_flags, java_options(archives.driver)]),
        "spark.executor.extraJavaOptions": java_options(archives.executor),
    }


def make_archives(cluster: StandaloneCluster, dest: Path) -> ClusterArchives | None:
    """Run the warm-up application on `cluster` with the class path of the applications
    on S3 (`storage_class_path`), and keep its driver's and executor's archives in
    `dest`; None (with a warning) when either was not written whole."""
    dest.mkdir(parents=True, exist_ok=True)
    java = launch_java(cluster.env)
    if java is None:
        return None
    record = " ".join(["-XX:+RecordDynamicDumpInfo", *JAVA_FLAGS])
    conf = {
        **application_conf(cluster),
        **storage_class_path(),
        "spark.cores.max": "1",  # one executor
        "spark.driver.extraJavaOptions": record,
        "spark.executor.extraJavaOptions": record,
    }
    args = [str(java.parent / "jcmd"), str(dest), str(cluster.url)]
    # The warm-up runs outside the repository (its session's files go to `dest`) and
    # imports `executors` from it.
    path = os.pathsep.join(filter(None, [str(REPO), cluster.env.get("PYTHONPATH")]))
    run = subprocess.run(
        [sys.executable, "-c", _WARM_UP, *args, *(f"{k}={v}" for k, v in conf.items())],
        capture_output=True,
        text=True,
        env={**cluster.env, "PYTHONPATH": path},
        cwd=dest,
        timeout=600,
        check=False,
    )
    archives = ClusterArchives(driver=dest / "driver.jsa", executor=dest / "executor.jsa")
    if run.returncode != 0:
        logger.warning("no class archives for the cluster: %s", run.stderr[-2000:])
        return None
    if not (maps_whole(java, archives.driver) and maps_whole(java, archives.executor)):
        logger.warning("the cluster's class archives do not load: %s", dest)
        return None
    return archives
