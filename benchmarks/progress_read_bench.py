"""What reading a streaming query's progress costs: `recentProgress` (the whole list
Spark keeps) against `lastProgress` (the newest update).

    .venv/bin/python benchmarks/progress_read_bench.py [--updates 100] [--calls 200]

A continuous run looks at every live query's progress twice a second
(`warehouse.runtime.pipeline`). pyspark's `recentProgress` asks the JVM for each kept
update's JSON in a call of its own and parses it; Spark keeps
`spark.sql.streaming.numRecentProgressUpdates` (100) of them, which a query reaches
after that many batches, or idle reports (one in 10 s). The script runs a query on
Spark's `rate` source into the `noop` sink, with a 50 ms trigger, until it has kept
`--updates` updates (at most 100), stops it, and then times `--calls` reads of each
kind: wall time, and CPU of this process (Python) and of Spark's JVM (/proc), per call.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from bench_session import local_session
from proc_cpu import proc_stat, stat_cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=int, default=100, help="updates kept before timing")
    ap.add_argument("--calls", type=int, default=200, help="reads of the whole list timed")
    args = ap.parse_args()

    spark = local_session("progress-read-bench")
    jvm_pid = spark.sparkContext._jvm.ProcessHandle.current().pid()

    def jvm_cpu() -> float:
        return stat_cpu(proc_stat(f"/proc/{jvm_pid}/stat")[1])

    with tempfile.TemporaryDirectory() as tmp:
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 10)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", f"{tmp}/checkpoint")
            .trigger(processingTime="50 milliseconds")
            .start()
        )
        # Spark's list holds one fewer than its setting once it is full.
        want = min(args.updates, 99)
        while len(query.recentProgress) < want:
            time.sleep(0.5)
        query.stop()
        kept = len(query.recentProgress)
        print(f"updates kept: {kept}")
        for name, calls, read in [
            ("recentProgress", args.calls, lambda: query.recentProgress),
            ("lastProgress", args.calls * 10, lambda: query.lastProgress),
        ]:
            jvm0, py0, wall0 = jvm_cpu(), time.process_time(), time.perf_counter()
            for _ in range(calls):
                read()
            jvm1, py1, wall1 = jvm_cpu(), time.process_time(), time.perf_counter()
            print(
                f"{name}: {calls} calls, per call {1000 * (wall1 - wall0) / calls:.2f} ms wall, "
                f"{1000 * (py1 - py0) / calls:.2f} ms Python CPU, "
                f"{1000 * (jvm1 - jvm0) / calls:.2f} ms JVM CPU"
            )
    spark.stop()


if __name__ == "__main__":
    main()
