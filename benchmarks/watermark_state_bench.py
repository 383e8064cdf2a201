"""A large batch of a stateful query with a watermark: expressions interpreted outside
whole-stage code (`spark.sql.codegen.factoryMode=NO_CODEGEN`, what the framework sets on
such queries, docs/decisions/0047) against Spark's generated code (its default).

    .venv/bin/python benchmarks/watermark_state_bench.py [--rows 1000000] [--rounds 2]

Writes `--rows` orders (`order_id`, `user_id`, `amount`, `event_time` a second apart)
as Parquet, then in each round runs two queries over them as one `availableNow` batch
of a file stream, once per mode, alternating: `dropDuplicatesWithinWatermark` on
`order_id` (as `dwd_orders`), and a one-minute window aggregate per user (as
`dws_city_gmv_1m`), each into a `foreachBatch` that counts the rows. Prints the JVM's CPU
per query and mode (from /proc), and the interpreted mode's ratio to generated code in
the same round. The first round warms the JVM; read the last. Not a test: nothing is
asserted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_session import bench_run
from proc_cpu import cpu_by_kind

MODES = {"generated code": "FALLBACK", "interpreted": "NO_CODEGEN"}


def write_orders(spark, path: Path, rows: int) -> None:
    from pyspark.sql import functions as F

    (
        spark.range(rows)
        .select(
            F.concat(F.lit("o"), F.col("id").cast("string")).alias("order_id"),
            F.concat(F.lit("u"), (F.col("id") % 1000).cast("string")).alias("user_id"),
            (F.col("id") % 100 + 0.5).alias("amount"),
            F.timestamp_seconds(F.lit(1_767_225_600) + F.col("id")).alias("event_time"),
        )
        .repartition(2)
        .write.parquet(str(path))
    )


def run_query(spark, orders: Path, work: Path, kind: str, mode: str) -> tuple[float, int]:
    """(JVM CPU seconds, rows out) of one `availableNow` run of query `kind` in `mode`."""
    from pyspark.sql import functions as F

    stream = (
        spark.readStream.schema(spark.read.parquet(str(orders)).schema)
        .parquet(str(orders))
        .withWatermark("event_time", "10 minutes")
    )
    if kind == "dedupe":
        out = stream.dropDuplicatesWithinWatermark(["order_id"])
    else:
        out = stream.groupBy(F.window("event_time", "1 minute"), "user_id").agg(
            F.sum("amount").alias("gmv"), F.count(F.lit(1)).alias("orders")
        )
    counted: list[int] = []
    spark.conf.set("spark.sql.codegen.factoryMode", mode)
    try:
        writer = (
            out.writeStream.outputMode("update")
            .option(
                "checkpointLocation", str(work / f"cp-{kind}-{mode}-{len(list(work.iterdir()))}")
            )
            .foreachBatch(lambda df, _id: counted.append(df.count()))
            .trigger(availableNow=True)
        )
        before = cpu_by_kind().get("jvm", 0.0)
        writer.start().awaitTermination()
        return cpu_by_kind().get("jvm", 0.0) - before, sum(counted)
    finally:
        spark.conf.unset("spark.sql.codegen.factoryMode")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with bench_run("watermark-state-bench") as (spark, work):
        orders = work / "orders"
        write_orders(spark, orders, args.rows)
        for n in range(1, args.rounds + 1):
            for kind in ("dedupe", "aggregate"):
                cpu = {}
                for label, mode in MODES.items():
                    cpu[label], out = run_query(spark, orders, work, kind, mode)
                    print(f"round {n} {kind} {label}: {cpu[label]:.2f} JVM CPU-s, {out} rows out")
                ratio = cpu["interpreted"] / cpu["generated code"]
                print(f"round {n} {kind}: interpreted / generated code = {ratio:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
