"""The fixed CPU of a small batch's Delta work, between checkouts of the framework.

    .venv/bin/python benchmarks/batch_cpu_bench.py [--checkouts /work/main,.]
        [--batches 30] [--warm-up 60] [--rounds 2]

For each checkout (its directory first on `PYTHONPATH`), in a fresh process of its own
with the benchmarks' session (`bench_session.local_session`), alternating the order by
round:

- native upsert: `--warm-up` and then `--batches` timed batches of 5 rows through
  `streams.delta.write_batch` on the native engine into one table keyed on `id` (what
  a native DWS/ADS upsert table does with each batch of its query; the table grows a
  version a batch, as a running table does);
- change feed read: the python engine's Delta source reading the change feed of each of
  that table's last `--batches` versions (`DeltaStreamReader.read` of one version,
  what a Spark task of a `read: changes` table's batch does in a Python worker).

Prints per batch: the driver process's and the JVM's CPU (user + system, /proc), Spark
jobs, and each checkout's CPU against the first checkout's in the same round. The
upsert table is read back and must hold exactly the rows upserted. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = 5


def batch_frame(spark, batch: int):
    """Batch `batch`'s rows: `ROWS` new ids keyed `id % 40`, so batches update keys."""
    from pyspark.sql import functions as F

    return spark.range(batch * ROWS, (batch + 1) * ROWS, numPartitions=1).select(
        (F.col("id") % 40).alias("id"),
        F.concat(F.lit("city-"), (F.col("id") % 5).cast("string")).alias("city"),
        F.col("id").alias("seq"),
    )


def one_checkout(batches: int, warm_up: int) -> dict[str, float]:
    """The measurements of the checkout this process imports the framework from."""
    import shutil
    import tempfile

    from bench_session import cost_per_call, local_session
    from proc_cpu import cpu_by_kind, cpu_delta

    from streams.delta import DeltaTarget, write_batch
    from streams.delta.source import DeltaStreamReader, _table_schema, _Version

    spark = local_session("batch-cpu-bench")
    work = Path(tempfile.mkdtemp(prefix="batch-cpu-bench-"))
    try:
        path = str(work / "t")
        target = DeltaTarget(path, mode="upsert", keys=("id",), app_id="bench:q", engine="native")

        def upsert(b: int) -> None:
            write_batch(batch_frame(spark, b), b, target)

        for b in range(warm_up):
            upsert(b)
        wall, _, jobs = cost_per_call(spark, upsert, range(warm_up, warm_up + batches))
        # the CPU of as many batches again, by kind of process
        total = warm_up + batches
        c0 = cpu_by_kind()
        for b in range(total, total + batches):
            upsert(b)
        split = cpu_delta(c0, cpu_by_kind())
        total += batches
        got = {r["id"]: r["seq"] for r in spark.read.format("delta").load(path).collect()}
        want = {i % 40: i for i in range(total * ROWS)}
        assert got == want, "the upsert table does not hold the upserted rows"

        reader = DeltaStreamReader(path, "changes", None, _table_schema(path, "changes"))
        versions = range(total - batches, total)
        c0, t0 = cpu_by_kind(), time.perf_counter()
        rows = sum(
            sum(b.num_rows for b in reader.read(_Version(v)))  # type: ignore[attr-defined]
            for v in versions
        )
        read_cpu = cpu_delta(c0, cpu_by_kind()).get("driver", 0.0)
        read_wall = time.perf_counter() - t0
        assert rows >= batches * ROWS, f"the change feed held {rows} rows"
        return {
            "upsert_wall": wall,
            "upsert_jobs": jobs,
            "upsert_driver": split.get("driver", 0.0) / batches,
            "upsert_jvm": split.get("jvm", 0.0) / batches,
            "read_driver": read_cpu / batches,
            "read_wall": read_wall / batches,
        }
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def run_child(checkout: Path, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(checkout), str(HERE)]))
    out = subprocess.run(
        [sys.executable, __file__, "--one", "--batches", str(args.batches)]
        + ["--warm-up", str(args.warm_up)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{checkout}: the measurement failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--checkouts", default=str(HERE.parent), help="comma-separated directories")
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--warm-up", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_checkout(args.batches, args.warm_up)), flush=True)
        return 0
    checkouts = [Path(c).resolve() for c in args.checkouts.split(",")]
    for rnd in range(1, args.rounds + 1):
        order = checkouts if rnd % 2 else list(reversed(checkouts))
        print(f"round {rnd}, load average {os.getloadavg()[0]:.1f}", flush=True)
        got = {c: run_child(c, args) for c in order}
        base = got[checkouts[0]]
        for c in checkouts:
            m = got[c]
            up = m["upsert_driver"] + m["upsert_jvm"]
            up0 = base["upsert_driver"] + base["upsert_jvm"]
            print(
                f"  {c}: native upsert {m['upsert_driver'] * 1000:.0f} ms Python + "
                f"{m['upsert_jvm'] * 1000:.0f} ms JVM CPU ({up / up0:.2f} of the first), "
                f"{m['upsert_jobs']:.1f} Spark jobs, {m['upsert_wall']:.2f} s a batch; "
                f"change feed read of one version {m['read_driver'] * 1000:.1f} ms CPU "
                f"({m['read_driver'] / base['read_driver']:.2f} of the first)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
