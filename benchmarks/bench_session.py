"""The benchmarks' SparkSession: `local[2]`, launched as the CLI launches its sessions
(the framework's local defaults, the cached native jars, compiled pyspark workers),
two shuffle partitions, Spark's log at ERROR. `BENCH_JAVA_OPTIONS` in the environment
becomes the driver's `extraJavaOptions` (a JFR recording, another collector)."""

from __future__ import annotations

import os
from collections.abc import Mapping


def local_session(app_name: str, conf: Mapping[str, str] | None = None):
    from warehouse.runtime.session import get_session
    from warehouse.spec.config import SparkSettings

    settings = {"spark.sql.shuffle.partitions": "2", **(conf or {})}
    if os.environ.get("BENCH_JAVA_OPTIONS"):
        settings["spark.driver.extraJavaOptions"] = os.environ["BENCH_JAVA_OPTIONS"]
    spark = get_session(SparkSettings(master="local[2]", conf=settings), app_name=app_name)
    spark.sparkContext.setLogLevel("ERROR")
    return spark
