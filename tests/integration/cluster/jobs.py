"""`spark-submit warehouse/submit.py` against the test cluster, as a cluster user submits it.

The driver runs in client mode on this machine; each application asks for one 1-core
executor per worker (`spark.cores.max=2`), small heaps, no UI, two shuffle partitions
and two Delta snapshot partitions (two cores in all, docs/cluster.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.integration.cluster.standalone import StandaloneCluster
from warehouse.runtime.jars import cached_storage_jars, default_cache_dir

REPO = Path(__file__).resolve().parents[3]


def submit(
    cluster: StandaloneCluster,
    project: Path,
    layer: str,
    env: dict[str, str],
    *extra: str,
    executor_python: str = sys.executable,
    cwd: Path | None = None,
    verbose: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`spark-submit warehouse/submit.py --layer <layer> --env cluster --once` in client
    mode, from `cwd` (default: the project); `verbose`: with the framework's INFO log."""
    cmd = [
        str(cluster.home / "bin" / "spark-submit"),
        "--master",
        str(cluster.url),
        "--deploy-mode",
        "client",
        *conf_args(application_conf(cluster, executor_python)),
        *extra,
        str(REPO / "warehouse" / "submit.py"),
        "--layer",
        layer,
        "--project",
        str(project),
        "--env",
        "cluster",
        "--once",
        *(["--verbose"] if verbose else []),
    ]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=cwd or project, timeout=900
    )


def application_conf(
    cluster: StandaloneCluster, executor_python: str = sys.executable
) -> dict[str, str]:
    """The settings of every test application on `cluster` (module doc)."""
    return {
        "spark.pyspark.python": executor_python,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.cores.max": "2",
        "spark.driver.memory": "1g",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        # Two cores in all: Delta's snapshots in 2 tasks, not 50 (docs/cluster.md).
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.local.dir": str(cluster.local_dir),
    }


def storage_conf() -> dict[str, str]:
    """What a user passes for an S3-compatible store (docs/cluster.md): the endpoint and
    path-style addressing, no secrets; and the class path of Hadoop's S3 connector
    (`storage_class_path`)."""
    return {
        **storage_class_path(),
        "spark.hadoop.fs.s3a.endpoint": os.environ["AWS_ENDPOINT_URL"],
        "spark.hadoop.fs.s3a.path.style.access": "true",
    }


def storage_class_path() -> dict[str, str]:
    """Hadoop's S3 connector on the driver's and the executors' class path, as jars every
    node has here, as on EMR or Dataproc. (In `spark.jars`, even as `local:` URIs, every
    executor copies them into its working directory: 680 MB each.)"""
    jars = cached_storage_jars(default_cache_dir())
    assert jars is not None, "no object-storage jars cached: run `make install`"
    classpath = ":".join(str(j) for j in jars)
    return {"spark.driver.extraClassPath": classpath, "spark.executor.extraClassPath": classpath}


def failure(run: subprocess.CompletedProcess[str]) -> str:
    """The lines that say what went wrong, then the tail of the driver's log."""
    said = [
        ln
        for ln in run.stderr.splitlines()
        if ln.startswith(("error:", "Caused by:", "Traceback"))
        or "Error:" in ln
        or "Exception:" in ln
    ]
    return "\n".join(said[:20]) + "\n...\n" + run.stderr[-2000:]


def engine_conf(engine: str) -> dict[str, str]:
    """What a user passes for `engine`: nothing for `python` (`engines: auto` then finds no
    native classes), the native engines' jars and Delta's extension and catalog for
    `native`, as `--packages` would pass them."""
    if engine == "python":
        return {}
    from warehouse.runtime.jars import cached_jars, default_cache_dir

    jars = cached_jars(default_cache_dir())
    assert jars is not None, "no native jars cached: run `make install`"
    return jars.spark_conf()


def conf_args(conf: dict[str, str]) -> list[str]:
    """`--conf k=v` for each setting."""
    return [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]


def engine_args(engine: str) -> list[str]:
    return conf_args(engine_conf(engine))
