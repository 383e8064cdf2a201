"""What it costs to build a batch's checked frame on the one-pass write, before any job.

    .venv/bin/python benchmarks/observe_frames_bench.py [--batches 500]

`dwd_orders`' SQL (two joins, its dedupe) over small in-memory frames and its expectation
(`amount` at least 0, `drop`). Each batch the one-pass write builds the frame it writes:
`RowChecks.observe` (the checks' predicates written into an observation and a filter:
two DataFrames), against the baseline of the same run, the checks' flags projected as
columns first (a projection, the observation, the filter, a projection dropping the
flags) and the written rows observed apart: five DataFrames, each one analysing the
batch's whole plan again. Prints the CPU (this process and the JVM, from /proc) and the
wall time per batch of each, interleaved in rounds, and their ratio
(docs/decisions/0076-expectations-observed-in-two-dataframes.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from warehouse.quality.rows import RowChecks
from warehouse.spec.table import Expectation

ROOT = Path(__file__).resolve().parent.parent


def dwd_orders_batch(spark: SparkSession) -> DataFrame:
    """The example's `dwd_orders` transform and dedupe over small static frames."""
    spark.range(100).select(
        F.col("id").alias("order_id"),
        (F.col("id") % 7).alias("user_id"),
        (F.col("id") % 5).alias("product_id"),
        F.lit(2).alias("quantity"),
        (F.col("id") * 1.5).alias("amount"),
        F.lit("eur").alias("currency"),
        F.current_timestamp().alias("event_time"),
    ).createOrReplaceTempView("source")
    spark.range(7).select(
        F.col("id").alias("user_id"), F.lit("Oslo").alias("city"), F.lit(True).alias("is_current")
    ).createOrReplaceTempView("dim_users")
    spark.range(5).select(
        F.col("id").alias("product_id"), F.lit("books").alias("category")
    ).createOrReplaceTempView("dim_products")
    sql = (ROOT / "layers" / "dwd" / "orders.sql").read_text()
    return spark.sql(sql).dropDuplicates(["order_id"])


def projected_flags(checks: RowChecks, batch: DataFrame, i: int) -> DataFrame:
    """The baseline: flags projected as columns, observed, filtered, dropped; the written
    rows observed apart."""
    flags = [f"__flag_{n}" for n in range(len(checks.checks))]
    flagged = batch.select(
        "*", *[c.failed_column().alias(f) for c, f in zip(checks.checks, flags, strict=True)]
    )
    removed: Column = F.col(flags[0]) if len(flags) == 1 else F.greatest(*map(F.col, flags))
    observed = flagged.observe(
        Observation(f"baseline_checks_{i}"),
        F.count(F.lit(1)).alias("rows"),
        F.coalesce(F.sum(removed.cast("long")), F.lit(0)).alias("removed"),
        *[F.coalesce(F.sum(F.col(f).cast("long")), F.lit(0)).alias(f) for f in flags],
    )
    good = observed.filter(~removed).select(*batch.columns)
    return good.observe(Observation(f"baseline_written_{i}"), F.count(F.lit(1)).alias("rows"))


def observed(checks: RowChecks, batch: DataFrame, i: int) -> DataFrame:
    """What the one-pass write builds: `RowChecks.observe`."""
    return checks.observe(batch, Observation(f"checks_{i}"))


def cpu_seconds(jvm_pid: int) -> float:
    """User and system CPU of this process and the JVM so far."""
    own = os.times()
    with open(f"/proc/{jvm_pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return own.user + own.system + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=500, help="frames per variant")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    args = parser.parse_args()
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    batch = dwd_orders_batch(spark)
    exp = Expectation.model_validate(
        {
            "expect_column_values_to_be_between": {"column": "amount", "min_value": 0},
            "on_violation": "drop",
        }
    )
    checks = RowChecks.compile([exp], batch.schema, table="dwd_orders")
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    variants = {"projected flags (baseline)": projected_flags, "RowChecks.observe": observed}
    n = 0
    for build in variants.values():  # warm both up
        for _ in range(args.batches // 2):
            build(checks, batch, n := n + 1)
    per_batch: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, build in variants.items():
            c0, t0 = cpu_seconds(jvm_pid), time.perf_counter()
            for _ in range(args.batches // args.rounds):
                build(checks, batch, n := n + 1)
            count = args.batches // args.rounds
            per_batch[name].append(
                ((cpu_seconds(jvm_pid) - c0) / count, (time.perf_counter() - t0) / count)
            )
    print(f"{args.batches} frames per variant in {args.rounds} interleaved rounds, local[1]:")
    cpu = {}
    for name, runs in per_batch.items():
        cpu[name] = statistics.median(c for c, _ in runs)
        wall = statistics.median(w for _, w in runs)
        print(f"  {name}: {cpu[name] * 1000:.1f} ms CPU, {wall * 1000:.1f} ms wall per batch")
    base, new = cpu.values()
    print(f"RowChecks.observe / baseline, CPU: {new / base:.2f}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
