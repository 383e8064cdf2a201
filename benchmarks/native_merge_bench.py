"""A native upsert's fixed cost: what Delta's and Spark's settings change in a small MERGE.

    .venv/bin/python benchmarks/native_merge_bench.py [--merges 20] [--rounds 2] [--rows 5]
        [--cases "defaults,no checksum file"]

One SparkSession (started as the CLI starts its sessions, with the cached native jars).
Each case upserts `--merges` batches of `--rows` rows through `streams.delta.write_batch`
on the native engine (an `upsert` sink keyed on `id`, what every native upsert table
does) into a fresh table of 60 keys, with the case's session settings set for its
batches only. A batch updates some keys and inserts others. The first three batches of
a table (the first creates it with all 60 keys) warm the JVM up and are not timed. The
cases alternate order by round. Prints per batch: wall seconds, the JVM's CPU seconds
(user + system, from /proc), Spark jobs, and each case's CPU against the first case's in
the same round. After each case the table is read back and must hold exactly the rows
the batches upserted. Not a test.
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
KEYS = 60

CASES: dict[str, dict[str, str]] = {
    "defaults": {},
    "source not copied": {"spark.databricks.delta.merge.materializeSource": "none"},
    "no checksum file": {"spark.databricks.delta.writeChecksumFile.enabled": "false"},
    "adaptive execution off": {"spark.sql.adaptive.enabled": "false"},
    "no whole-stage code": {"spark.sql.codegen.wholeStage": "false"},
    "expressions interpreted": {
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    },
    "deletion vectors": {
        "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true"
    },
    "no data skipping": {"spark.databricks.delta.stats.skipping": "false"},
}
"""Each case's session settings, set for its batches only. The table is created in a
case's first batch, so a `properties.defaults` setting becomes a table property."""


def ids(batch: int, rows: int) -> range:
    """The ids of batch `batch`: batch 0 creates the table with `KEYS` rows, each later
    batch has `rows` new ids."""
    return range(KEYS) if batch == 0 else range(KEYS + batch * rows, KEYS + (batch + 1) * rows)


def batch_frame(spark, batch: int, rows: int):
    """Batch `batch`'s rows, keyed `id * 7 % KEYS`: a later batch updates some keys."""
    from pyspark.sql import functions as F

    span = ids(batch, rows)
    return spark.range(span.start, span.stop, numPartitions=1).select(
        (F.col("id") * 7 % KEYS).alias("id"),
        F.concat(F.lit("city-"), (F.col("id") % 5).cast("string")).alias("city"),
        (F.col("id") / 10).cast("double").alias("amount"),
        F.col("id").alias("seq"),
    )


def expected(batches: int, rows: int) -> dict[int, tuple[str, float, int]]:
    """{key: (city, amount, seq)} after `batches` batches: the last write of a key wins."""
    out = {}
    for batch in range(batches):
        for i in ids(batch, rows):
            out[i * 7 % KEYS] = (f"city-{i % 5}", i / 10, i)
    return out


def upsert(spark, path: Path, batch: int, rows: int) -> None:
    from streams.delta import DeltaTarget, write_batch

    target = DeltaTarget(str(path), mode="upsert", keys=("id",), app_id="bench:q", engine="native")
    write_batch(batch_frame(spark, batch, rows), batch, target)


def timed(spark, conf: dict[str, str], path: Path, merges: int, rows: int):
    """(wall s, JVM CPU s, Spark jobs) per batch over `merges` timed batches."""
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        for batch in range(WARM_UP):
            upsert(spark, path, batch, rows)
        cost = cost_per_call(
            spark, lambda b: upsert(spark, path, b, rows), range(WARM_UP, WARM_UP + merges)
        )
    finally:
        for k in conf:
            spark.conf.unset(k)
    got = {
        r["id"]: (r["city"], r["amount"], r["seq"])
        for r in spark.read.format("delta").load(str(path)).collect()
    }
    assert got == expected(WARM_UP + merges, rows), "the table does not hold the upserted rows"
    return cost


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--merges", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rows", type=int, default=5)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",")]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; known: {list(CASES)}")

    with bench_run("native-merge-bench") as (spark, work):
        for rnd in range(1, args.rounds + 1):
            order = cases if rnd % 2 else list(reversed(cases))
            got = {}
            for i, name in enumerate(order):
                got[name] = timed(spark, CASES[name], work / f"r{rnd}-{i}", args.merges, args.rows)
            base = got[cases[0]][1]
            for name in cases:
                wall, cpu, jobs = got[name]
                print(
                    f"round {rnd}: {name}: {wall:.2f} s, JVM CPU {cpu:.2f} s "
                    f"({cpu / base:.2f} of {cases[0]}), {jobs:.1f} Spark jobs per upsert",
                    flush=True,
                )


if __name__ == "__main__":
    main()
