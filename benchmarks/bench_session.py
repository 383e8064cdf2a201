"""The benchmarks' SparkSession: `local[2]`, launched as the CLI launches its sessions
(the framework's local defaults, the cached native jars, compiled pyspark workers),
two shuffle partitions, Spark's log at ERROR. `BENCH_JAVA_OPTIONS` in the environment
becomes the driver's `extraJavaOptions` (a JFR recording, another collector).
`bench_run` gives such a session with a scratch directory; `cost_per_call` measures what
a repeated write costs in it."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from proc_cpu import cpu_by_kind, cpu_delta


def local_session(app_name: str, conf: Mapping[str, str] | None = None):
    from warehouse.runtime.session import get_session
    from warehouse.spec.config import SparkSettings

    settings = {"spark.sql.shuffle.partitions": "2", **(conf or {})}
    if os.environ.get("BENCH_JAVA_OPTIONS"):
        settings["spark.driver.extraJavaOptions"] = os.environ["BENCH_JAVA_OPTIONS"]
    spark = get_session(SparkSettings(master="local[2]", conf=settings), app_name=app_name)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def bench_run(name: str) -> Iterator[tuple[Any, Path]]:
    """`local_session(name)` and a scratch directory, the load average printed when the
    run starts and when it ends; the session stopped and the directory removed after."""
    spark = local_session(name)
    work = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    try:
        print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
        yield spark, work
        print(f"load average at end: {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def newest_job(spark) -> int:
    """The newest Spark job's id: ids count up, and Spark keeps only its newest 1000 jobs,
    so a count of the kept ones falls short on a long run."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)


def cost_per_call(
    spark, call: Callable[[int], object], args: Iterable[int], kinds: Iterable[str] = ("jvm",)
) -> tuple[float, float, float]:
    """(wall s, CPU s, Spark jobs) per `call(a)` over `args`; the CPU is that of the
    processes of `kinds` (`proc_cpu`: the JVM by default), read from /proc."""
    args = list(args)
    jobs0 = newest_job(spark)
    cpu0, t0 = cpu_by_kind(), time.perf_counter()
    for a in args:
        call(a)
    wall = time.perf_counter() - t0
    spent = cpu_delta(cpu0, cpu_by_kind())
    cpu = sum(spent.get(k, 0.0) for k in kinds)
    jobs = newest_job(spark) - jobs0
    return wall / len(args), cpu / len(args), jobs / len(args)
