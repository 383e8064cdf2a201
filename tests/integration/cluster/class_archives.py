"""Class archives (Java's application class-data sharing) for the JVMs of the test
cluster's applications: their drivers and the executors the workers launch.

A crash test's life on the cluster is a driver JVM and two executor JVMs started anew;
each parses and verifies Spark's classes from the jars before its first batch. The
archive `warehouse jars fetch` makes serves local sessions only: Java maps an archive
only for the class path it was made with, and a cluster application's class path holds
the cluster's configuration folder (a folder of this test run) and Hadoop's S3
connector. So a warm-up application on the cluster makes a pair for this run: its
driver and its one executor each write one at exit (`-XX:ArchiveClassesAtExit`). An
executor writes its own into its working folder, since at an application's end the
master may launch a replacement executor, which would write over a shared path.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.integration.cluster.jobs import application_conf, storage_conf
from tests.integration.cluster.standalone import StandaloneCluster
from warehouse.runtime.class_archive import JAVA_FLAGS, maps_whole
from warehouse.runtime.spark_home import launch_java

logger = logging.getLogger(__name__)

EXECUTOR_ARCHIVE = "executor.jsa"
"""Relative: in each executor's working folder."""

_WARM_UP = """
import sys
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

builder = SparkSession.builder.master(sys.argv[1]).appName("class-archive-warm-up")
for kv in sys.argv[2:]:
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
jvm = spark.sparkContext._gateway.proc
spark.stop()
jvm.stdin.close()  # the driver JVM exits, and writes its archive
sys.exit(jvm.wait(timeout=300))
"""
"""A shuffle, JSON functions and a Python task: the paths every crash-test life runs."""


@dataclass(frozen=True)
class ClusterArchives:
    """The archives of one warm-up application: a JVM maps one only with the class path
    it was made with (the cluster's configuration folder, Hadoop's S3 connector, Spark's
    jars), and loads its classes from the jars otherwise."""

    driver: Path
    executor: Path

    def driver_options(self) -> str:
        return " ".join([f"-XX:SharedArchiveFile={self.driver}", *JAVA_FLAGS])

    def executor_options(self) -> str:
        return " ".join([f"-XX:SharedArchiveFile={self.executor}", *JAVA_FLAGS])


def make_archives(cluster: StandaloneCluster, dest: Path) -> ClusterArchives | None:
    """Run the warm-up application on `cluster` with the class path of the crash test's
    applications (`storage_conf`), and keep its driver's and executor's archives in
    `dest`; None (with a warning) when either was not written whole."""
    dest.mkdir(parents=True, exist_ok=True)
    driver = dest / "driver.jsa"
    dump = " ".join(JAVA_FLAGS)
    conf = {
        **application_conf(cluster),
        **storage_conf(),
        "spark.cores.max": "1",  # one executor writes the executor's archive
        "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={driver} {dump}",
        "spark.executor.extraJavaOptions": f"-XX:ArchiveClassesAtExit={EXECUTOR_ARCHIVE} {dump}",
    }
    before = set(cluster.work_dir.glob("worker-*/app-*"))
    run = subprocess.run(
        [sys.executable, "-c", _WARM_UP, str(cluster.url), *(f"{k}={v}" for k, v in conf.items())],
        capture_output=True,
        text=True,
        env=cluster.env,
        cwd=dest,
        timeout=600,
        check=False,
    )
    apps = set(cluster.work_dir.glob("worker-*/app-*")) - before
    executors = [d for app in apps for d in app.iterdir() if d.is_dir()]
    deadline = time.monotonic() + 120
    while not all(_exited(d, cluster) for d in executors) and time.monotonic() < deadline:
        time.sleep(0.5)  # the worker stops its executors after the driver has gone
    written = [
        d / EXECUTOR_ARCHIVE
        for d in executors
        if _exited(d, cluster) and (d / EXECUTOR_ARCHIVE).is_file()
    ]
    java = launch_java(cluster.env)
    if run.returncode != 0 or java is None or not written:
        logger.warning(
            "no class archives for the cluster (exit %d): %s", run.returncode, run.stderr[-2000:]
        )
        return None
    executor = dest / EXECUTOR_ARCHIVE
    executor.write_bytes(max(written, key=lambda p: p.stat().st_size).read_bytes())
    if not (maps_whole(java, driver) and maps_whole(java, executor)):
        logger.warning("the cluster's class archives do not load: %s, %s", driver, executor)
        return None
    return ClusterArchives(driver=driver, executor=executor)


def _exited(executor_dir: Path, cluster: StandaloneCluster) -> bool:
    """Whether the executor of `executor_dir` has ended, as its worker logs it: its JVM
    writes the archive before it exits."""
    app, executor = executor_dir.parent.name, executor_dir.name
    log = "\n".join(p.read_text(errors="replace") for p in cluster.log_dir.glob("worker-*.out"))
    return f"Executor {app}/{executor} finished" in log
