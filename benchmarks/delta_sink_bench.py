"""Delta sink benchmark: `streams.delta.write_batch` (append) against delta-rs alone.

    .venv/bin/python benchmarks/delta_sink_bench.py [--rows 1000000] [--repeats 3]

Builds `--rows` rows of ~200 B (id, user, city, amount, event time, a ~150 B payload)
once, cached in Spark and collected once as Arrow, then in the same run, interleaved,
best of `--repeats`:
  (a) `write_batch(df, b, DeltaTarget(..., mode="append"))`: executors write Parquet
      with stats via mapInArrow, the driver commits one Delta version with a txn;
  (b) delta-rs `write_deltalake(path, arrow_table, mode="append")`, no Spark.
Prints rows/s of each and the ratio (a)/(b). Not a test: nothing is asserted.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from deltalake import write_deltalake
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from streams.delta import DeltaTarget, table_info, write_batch

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("delta-sink-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.driver.maxResultSize", "2g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = (
        spark.range(args.rows, numPartitions=2)
        .select(
            F.col("id"),
            F.concat(F.lit("user-"), (F.col("id") % 100_000).cast("string")).alias("user_id"),
            F.element_at(
                F.array(*[F.lit(c) for c in ("paris", "rome", "oslo", "lima", "kyiv")]),
                (F.col("id") % 5 + 1).cast("int"),
            ).alias("city"),
            (F.col("id") % 10_000 / 100).cast("double").alias("amount"),
            F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id") % 86_400).alias("event_time"),
            F.sha2(F.col("id").cast("string"), 512).substr(1, 150).alias("payload"),
        )
        .cache()
    )
    df.count()
    arrow = df.toArrow()
    row_bytes = arrow.nbytes / arrow.num_rows
    print(f"rows={arrow.num_rows} arrow bytes/row={row_bytes:.0f}")

    root = Path(tempfile.mkdtemp(prefix="delta-sink-bench-"))
    best = {"write_batch": float("inf"), "write_deltalake": float("inf")}
    try:
        for r in range(args.repeats):
            path = root / f"sink-{r}"
            t0 = time.perf_counter()
            write_batch(df, 0, DeltaTarget(str(path), app_id="bench:q"))
            best["write_batch"] = min(best["write_batch"], time.perf_counter() - t0)
            assert table_info(path)["rows"] == args.rows

            path = root / f"rs-{r}"
            t0 = time.perf_counter()
            write_deltalake(str(path), arrow, mode="append")
            best["write_deltalake"] = min(best["write_deltalake"], time.perf_counter() - t0)
            shutil.rmtree(root / f"sink-{r}")
            shutil.rmtree(path)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    rate = {k: args.rows / v for k, v in best.items()}
    for k, v in rate.items():
        print(f"{k:16s} {v:12,.0f} rows/s  ({best[k]:.2f} s, {v * row_bytes / 1e6:.0f} MB/s)")
    print(
        f"ratio write_batch / write_deltalake = {rate['write_batch'] / rate['write_deltalake']:.2f}"
    )


if __name__ == "__main__":
    main()
