"""delta-spark on a local master: small appends and reads at Delta's default snapshot
partitions (50) against the framework's local setting (one per core).

    .venv/bin/python benchmarks/delta_snapshot_bench.py [--commits 12] [--rounds 2]

One SparkSession (started as the CLI starts its sessions, with the cached native jars);
each round writes `--commits` small idempotent appends (`txnAppId`/`txnVersion`, as the
native sink does) to a fresh table and reads its row count after each, once with
`spark.databricks.delta.snapshotPartitions` at 50 and once at the session's local value,
alternating which goes first. Prints seconds per append+read and the ratio; the first
round includes the JVM's warm-up of Delta's code paths. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

KEY = "spark.databricks.delta.snapshotPartitions"


def commits(spark, path: Path, n: int) -> float:
    """Seconds per append + count over `n` commits to a new table at `path`."""
    t0 = time.perf_counter()
    for i in range(n):
        df = spark.range(i * 100, (i + 1) * 100)
        writer = df.write.format("delta").mode("append")
        writer.option("txnAppId", "bench").option("txnVersion", i).save(str(path))
        rows = spark.read.format("delta").load(str(path)).count()
        assert rows == (i + 1) * 100, rows
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--commits", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    from bench_session import local_session

    spark = local_session("delta-snapshot-bench")
    local = spark.conf.get(KEY)
    work = Path(tempfile.mkdtemp(prefix="delta-snapshot-bench-"))
    try:
        for rnd in range(1, args.rounds + 1):
            order = ("50", local) if rnd % 2 else (local, "50")
            took: dict[str, float] = {}
            for value in order:
                spark.conf.set(KEY, value)
                took[value] = commits(spark, work / f"r{rnd}-{value}", args.commits)
            print(
                f"round {rnd}: snapshotPartitions 50: {took['50']:.2f} s per append+read, "
                f"{local}: {took[local]:.2f} s; ratio {took['50'] / took[local]:.1f}",
                flush=True,
            )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
