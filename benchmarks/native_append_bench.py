"""The native append's exactly-once guard: the sink's own (the writer's newest commit,
read by delta-rs) against Delta's app transaction (`txnAppId`/`txnVersion`).

    .venv/bin/python benchmarks/native_append_bench.py [--appends 20] [--rounds 3] [--rows 10]

One SparkSession (started as the CLI starts its sessions, with the cached native jars).
Each round writes `--appends` batches of `--rows` rows to two fresh tables: one through
`streams.delta.write_batch` on the native engine (what every native append table does),
one with the same delta-spark append plus the writer options `txnAppId`/`txnVersion`
(the guard it had before), alternating which goes first. The first appends of a table
are its creation and the JVM's warm-up of that path, so the first three of each table
are not timed. Prints per append: wall seconds, the JVM's CPU seconds (user + system,
from /proc) and Spark jobs, and the ratios. Not a test: nothing is asserted but the
row counts.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench_session import bench_run, cost_per_call

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

WARM_UP = 3


def sink_append(spark, path: Path, batch: int, rows: int) -> None:
    from streams.delta import DeltaTarget, write_batch

    target = DeltaTarget(str(path), app_id="bench:q", engine="native")
    write_batch(spark.range(batch * rows, (batch + 1) * rows), batch, target)


def txn_append(spark, path: Path, batch: int, rows: int) -> None:
    df = spark.range(batch * rows, (batch + 1) * rows)
    writer = df.write.format("delta").mode("append").option("txnAppId", "bench:q")
    writer.option("txnVersion", batch).save(str(path))


def timed(spark, write, path: Path, appends: int, rows: int) -> tuple[float, float, float]:
    """(wall s, JVM CPU s, Spark jobs) per append over `appends` timed appends."""
    for batch in range(WARM_UP):
        write(spark, path, batch, rows)
    cost = cost_per_call(
        spark, lambda b: write(spark, path, b, rows), range(WARM_UP, WARM_UP + appends)
    )
    count = spark.read.format("delta").load(str(path)).count()
    assert count == (WARM_UP + appends) * rows, count
    return cost


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--appends", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=10)
    args = ap.parse_args()

    with bench_run("native-append-bench") as (spark, work):
        cases = {"sink (delta-rs guard)": sink_append, "txnAppId/txnVersion": txn_append}
        for rnd in range(1, args.rounds + 1):
            names = list(cases) if rnd % 2 else list(reversed(cases))
            got = {}
            for i, name in enumerate(names):
                got[name] = timed(spark, cases[name], work / f"r{rnd}-{i}", args.appends, args.rows)
            for name in cases:
                wall, cpu, jobs = got[name]
                print(
                    f"round {rnd}: {name}: {wall:.2f} s, JVM CPU {cpu:.2f} s, "
                    f"{jobs:.1f} Spark jobs per append",
                    flush=True,
                )
            (ws, cs, _), (wt, ct, _) = got["sink (delta-rs guard)"], got["txnAppId/txnVersion"]
            print(f"round {rnd}: txn / sink: wall {wt / ws:.2f}, JVM CPU {ct / cs:.2f}", flush=True)


if __name__ == "__main__":
    main()
