"""Spark's Parquet writer under the codec and dictionary settings the Delta sink chooses.

    .venv/bin/python benchmarks/parquet_settings_bench.py [--rows 1000000] [--reps 3]

Writes the same cached frame (the ODS table of benchmarks/kafka_ingest_bench.py: five
payload fields plus the Kafka coordinates) once per setting and prints the JVM's CPU
seconds (user + system, from /proc, `ingest_runs.CpuMeter`) and the size of the
files, for two payloads: the ingest benchmark's (a repeated note and city) and one of
random text (hashes). Each line is the fastest of `--reps` writes after one discarded;
`noop` is the same frame written nowhere, the cost of reading the cache. Not a test:
nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

# Run as a script, this directory is on the path: the ingest benchmark's CPU meter.
from ingest_runs import CpuMeter

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

SETTINGS: dict[str, dict[str, str]] = {
    "snappy (Spark's default)": {},
    "snappy, _offset without dictionary": {"parquet.enable.dictionary#_offset": "false"},
    "zstd level 3": {"compression": "zstd"},
    "zstd level 1": {"compression": "zstd", "parquet.compression.codec.zstd.level": "1"},
    "zstd level 1, _offset without dictionary (the sink's)": {
        "compression": "zstd",
        "parquet.compression.codec.zstd.level": "1",
        "parquet.enable.dictionary#_offset": "false",
    },
    "lz4_raw, _offset without dictionary": {
        "compression": "lz4_raw",
        "parquet.enable.dictionary#_offset": "false",
    },
}


def frame(spark, rows: int, payload: str):
    from pyspark.sql import functions as F

    i = F.col("id")
    if payload == "repeated":
        city, note = F.lit("Oslo"), F.lit("x" * 110)
    else:
        cities = F.array(*[F.lit(c) for c in ("Oslo", "Bergen", "Trondheim", "Tromso", "Alta")])
        city = F.element_at(cities, (i % 5 + 1).cast("int"))
        note = F.concat(F.sha2(i.cast("string"), 256), F.lit(" "), F.sha1(i.cast("string")))
    return spark.range(0, rows, 1, 4).select(
        i.alias("order_id"),
        (i % 9973).alias("user_id"),
        ((i % 10000) / 100).alias("amount"),
        city.alias("city"),
        note.alias("note"),
        F.lit("bench").alias("_topic"),
        (i % 4).cast("int").alias("_partition"),
        F.floor(i / 4).cast("long").alias("_offset"),
        F.timestamp_millis(F.lit(1_763_700_000_000) + F.floor(i / 50)).alias("_timestamp"),
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    from warehouse.runtime.session import get_session
    from warehouse.spec.config import SparkSettings

    conf = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
    spark = get_session(SparkSettings(master="local[2]", conf=conf), app_name="parquet-bench")
    spark.sparkContext.setLogLevel("ERROR")
    work = tempfile.mkdtemp(prefix="parquet-bench-")
    per_m = 1_000_000 / args.rows
    try:
        for payload in ("repeated", "random"):
            df = frame(spark, args.rows, payload).persist()
            df.count()
            print(f"-- payload: {payload} ({args.rows:,} rows)", flush=True)
            cases: dict[str, dict[str, str] | None] = {"noop": None, **SETTINGS}
            for label, options in cases.items():
                cpu: list[float] = []
                size = 0
                for rep in range(args.reps + 1):
                    path = os.path.join(work, f"{payload}-{len(cpu)}-{time.monotonic_ns()}")
                    meter = CpuMeter().start()
                    if options is None:
                        df.write.format("noop").mode("overwrite").save()
                    else:
                        writer = df.write
                        for k, v in options.items():
                            writer = writer.option(k, v)
                        writer.parquet(path)
                        size = sum(
                            os.path.getsize(os.path.join(d, f))
                            for d, _, files in os.walk(path)
                            for f in files
                            if f.endswith(".parquet")
                        )
                        shutil.rmtree(path)
                    if rep:  # the first write of each setting warms its code paths
                        cpu.append(meter.stop().get("jvm", 0.0))
                print(
                    f"  {label:<55} jvm cpu {min(cpu) * per_m:5.2f} s per 1M rows"
                    + (f", {size / 1e6:6.1f} MB" if options is not None else ""),
                    flush=True,
                )
            df.unpersist()
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
