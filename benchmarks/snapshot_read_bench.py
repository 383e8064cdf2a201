"""A snapshot read of a Delta table that gains a version before every read: what a
dimension of a stream-static join costs each micro-batch while the dimension changes.

    .venv/bin/python benchmarks/snapshot_read_bench.py [--reads 10] [--rows 1000]

One SparkSession (started as the CLI starts its sessions, with the cached native jars)
and a Delta table of `--rows` rows. Before each read one row is appended: a new version,
as a dimension's CDC batch makes. Then each case counts the table once, the cases in
reverse order every other read:

- latest, native: one DataFrame of `spark.read.format("delta").load(path)`, executed
  again at each read. Delta moves it to the newest version, as it moves the snapshot
  side of a stream-static join at every micro-batch.
- pinned, native: one DataFrame read with `versionAsOf` the version the reads began
  at, executed again.
- pinned anew, native: a new `versionAsOf` DataFrame of that version at each read.
- latest, python: the Python engines' snapshot read (`read_snapshot_python`, delta-rs
  in a Python worker), one DataFrame executed again.

Each count is checked: a latest read sees every row appended so far, a pinned one the
rows of its version. Prints per read and case the wall seconds, the CPU seconds of the
JVM and of Spark's Python workers (user + system, from /proc) and the Spark jobs. Not a
test.
"""

from __future__ import annotations

import argparse
import os
import sys

from bench_session import bench_run, cost_per_call

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

WARM_UP = 3


def append_one(spark, path: str, n: int) -> None:
    spark.range(n, n + 1).selectExpr("id", "'new' AS v").write.format("delta").mode("append").save(
        path
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reads", type=int, default=10)
    ap.add_argument("--rows", type=int, default=1000)
    args = ap.parse_args()

    from streams.delta.source import read_snapshot_python

    with bench_run("snapshot-read-bench") as (spark, work):
        path = str(work / "dim")
        spark.range(args.rows).selectExpr("id", "CAST(id AS string) AS v").write.format(
            "delta"
        ).save(path)
        rows = args.rows
        for _ in range(WARM_UP):
            append_one(spark, path, rows)
            rows += 1
        start = WARM_UP
        at_start = rows
        latest = spark.read.format("delta").load(path)
        pinned = spark.read.format("delta").option("versionAsOf", start).load(path)
        python = read_snapshot_python(spark, path)
        cases = {
            "latest, native": (lambda: latest, True),
            "pinned, native": (lambda: pinned, False),
            "pinned anew, native": (
                lambda: spark.read.format("delta").option("versionAsOf", start).load(path),
                False,
            ),
            "latest, python": (lambda: python, True),
        }
        for frame, _ in cases.values():  # each case's first execution: not timed
            frame().count()
        totals = {name: [0.0, 0.0, 0.0] for name in cases}
        for n in range(args.reads):
            append_one(spark, path, rows)
            rows += 1
            order = list(cases) if n % 2 == 0 else list(reversed(cases))
            for name in order:
                frame, moves = cases[name]
                counted: list[int] = []
                cost = cost_per_call(
                    spark,
                    lambda _i, f=frame, out=counted: out.append(f().count()),
                    [0],
                    kinds=("jvm", "python workers"),
                )
                want = rows if moves else at_start
                assert counted == [want], f"{name}: counted {counted[0]}, expected {want}"
                for i, x in enumerate(cost):
                    totals[name][i] += x / args.reads
        for name, (wall, cpu, jobs) in totals.items():
            print(
                f"{name}: {wall:.3f} s, CPU {cpu:.3f} s (JVM and Python workers), "
                f"{jobs:.1f} Spark jobs per read",
                flush=True,
            )


if __name__ == "__main__":
    main()
