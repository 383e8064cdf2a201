"""What a table's growing Delta log costs its writer and an idle reader, on each engine.

    .venv/bin/python benchmarks/delta_log_growth.py [--levels 100,3000,10000] [--engines python,native]

A continuous run commits about once a second to each table whose input moves, and Delta
removes a log's old commit files only once they are older than
`delta.logRetentionDuration` (30 days by default). On a local disk both engines find the
newest commits by listing the whole `_delta_log` folder (delta-rs and delta-kernel
through `object_store`'s local listing, delta-spark through Hadoop's `listStatus`): a
cost that grows with the folder, not with the commits read.

For each engine and each level: a new table written by the engine's `write_batch`
(`streams.delta`, as a table's batches are), its log then grown to `level` commits by
copying its newest commit file (the same append again: the folder's size is what is
measured, not the data), a checkpoint at the new tip (as the table's own checkpoint every
100 commits leaves one close), and then:

- `--appends` appends through `write_batch` on the engine, CPU per append of every
  process of the run (the driver, where delta-rs commits; the JVM; Python workers), from
  /proc;
- a Delta stream of the table (`read_delta_stream` on the engine) started with a no-op
  `foreachBatch`, and once it has caught up, its CPU per second over `--idle-seconds`
  with nothing new, less the same window's CPU without the stream (taken first).

Before the levels, a table at the smallest level warms each engine's path (not printed).
Ratios are against the smallest level in the same run. Not a test: nothing is asserted
but the rows the appends leave.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench_session import bench_run
from proc_cpu import cpu_by_kind, cpu_delta

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def grow(path: Path, to: int) -> int:
    """Copy the table's newest commit file as new versions until the log holds versions
    0..to-1; then a checkpoint at the tip. The folder's file count."""
    from deltalake import DeltaTable

    log = path / "_delta_log"
    versions = sorted(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit())
    newest = versions[-1]
    text = (log / f"{newest:020d}.json").read_text()
    for v in range(newest + 1, to):
        tmp = log / f".{v}.tmp"
        tmp.write_text(text)
        tmp.rename(log / f"{v:020d}.json")
    DeltaTable(str(path)).create_checkpoint()
    return len(os.listdir(log))


def cpu_now() -> tuple[dict[str, float], float]:
    return cpu_by_kind(), time.monotonic()


def cpu_since(start: tuple[dict[str, float], float]) -> tuple[float, float]:
    """(CPU s of every process of the run, wall s) since `start`."""
    cpu0, t0 = start
    return sum(cpu_delta(cpu0, cpu_by_kind()).values()), time.monotonic() - t0


def idle_stream_cpu(spark, path: Path, engine: str, seconds: float, quiet: float) -> float:
    """CPU per second of a caught-up, idle Delta stream of `path`, less `quiet`."""
    from streams.delta import read_delta_stream

    batches: list[int] = []
    query = (
        read_delta_stream(spark, str(path), engine=engine)
        .writeStream.foreachBatch(lambda df, b: batches.append(b))
        .option("checkpointLocation", str(path) + "-reader")
        .start()
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not batches:
            time.sleep(0.5)
        seen, since = len(batches), time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - since < 5:
            time.sleep(0.5)
            if len(batches) != seen:
                seen, since = len(batches), time.monotonic()
        start = cpu_now()
        time.sleep(seconds)
        cpu, wall = cpu_since(start)
        if len(batches) != seen:
            raise AssertionError(f"the stream ran {len(batches) - seen} batch(es) while idle")
        return cpu / wall - quiet
    finally:
        query.stop()


def one_level(spark, work: Path, engine: str, level: int, args, quiet: float) -> dict:
    from deltalake import DeltaTable

    from streams.delta import DeltaTarget, write_batch

    path = work / f"{engine}-{level}"
    target = DeltaTarget(str(path), app_id="bench:q", engine=engine)
    rows = 10

    def append(b: int) -> None:
        write_batch(spark.range(b * rows, (b + 1) * rows), b, target)

    append(0)
    append(1)  # the newest commit is an append, not the table's creation
    files = grow(path, level)
    first = DeltaTable(str(path)).version() + 1
    append(first)  # the first through the grown log: the kept table opens it
    start = cpu_now()
    for b in range(first + 1, first + 1 + args.appends):
        append(b)
    cpu, wall = cpu_since(start)
    count = spark.read.format("delta").load(str(path)).count() if engine == "native" else None
    if count is not None:
        # `grow`'s copies add the same file again: one file's rows in the table's state.
        assert count == (args.appends + 3) * rows, count
    idle = idle_stream_cpu(spark, path, engine, args.idle_seconds, quiet)
    return {
        "files": files,
        "append_cpu": cpu / args.appends,
        "append_wall": wall / args.appends,
        "idle": idle,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--levels", default="100,3000,10000")
    ap.add_argument("--engines", default="python,native")
    ap.add_argument("--appends", type=int, default=5)
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    args = ap.parse_args()
    levels = sorted(int(x) for x in args.levels.split(","))
    with bench_run("delta-log-growth") as (spark, work):
        start = cpu_now()
        time.sleep(args.idle_seconds)
        cpu, wall = cpu_since(start)
        quiet = cpu / wall
        print(f"the session alone: {quiet * 1000:.1f} ms CPU per second", flush=True)
        for engine in args.engines.split(","):
            # A first table at the smallest level warms the JVM's and the engine's paths.
            (work / f"warm-up-{engine}").mkdir()
            one_level(spark, work / f"warm-up-{engine}", engine, levels[0], args, quiet)
            got = [one_level(spark, work, engine, level, args, quiet) for level in levels]
            base = got[0]
            for level, g in zip(levels, got, strict=True):
                print(
                    f"{engine}: {level} commits ({g['files']} log files): an append "
                    f"{g['append_cpu'] * 1000:.0f} ms CPU ({g['append_wall'] * 1000:.0f} ms), "
                    f"{g['append_cpu'] / base['append_cpu']:.2f}x; an idle stream "
                    f"{g['idle'] * 1000:.1f} ms CPU/s, {g['idle'] / base['idle']:.2f}x",
                    flush=True,
                )


if __name__ == "__main__":
    main()
