"""What Delta's log checkpoint costs a native table: appends and reads of tables that
checkpoint every 10 commits (delta-spark's default) and every 100 (the framework's,
`TABLE_CONFIGURATION`, and delta-rs's default).

    .venv/bin/python benchmarks/native_checkpoint_bench.py [--commits 100] [--rounds 3] [--rows 10]

One SparkSession (started as the CLI starts its sessions, with the cached native jars).
Each round creates a fresh empty table per interval (version 0, with the framework's
table properties but that `delta.checkpointInterval`), alternating which goes first,
and appends `--commits` batches of `--rows` rows to it through `streams.delta.write_batch`
on the native engine (versions 1 to commits). The first three appends of a table are
the JVM's warm-up of that path, so they are not timed. Per interval it prints the mean
wall seconds, JVM CPU seconds (user + system, from /proc) and Spark jobs of an append,
of the appends that wrote a checkpoint, and of the others. Before the last append it
times the reads of the table at the version before it, with the default `--commits`
the furthest from a checkpoint for both intervals: delta-rs opening the table
(`DeltaTable(path)`, as the sink and a snapshot read do; the driver's wall and CPU), and
Spark's first count of that version (delta-spark rebuilding its state from the
checkpoint and the commits after it). After every timed append it also times, on the
driver, delta-rs opening the table anew, a table kept open since the append before
reading the one new commit (`streams.delta.commit.KeptTable`, as the native writer,
the quality events, the Python engine's reader and the publisher read theirs), and
then, with no new commit, the kept table asked again and delta-rs's own
`update_incremental` of an open table; their means over the timed appends are
printed. Not a test: nothing is asserted but the row counts and the interval the
table kept.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench_session import bench_run, cost_per_call

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

WARM_UP = 3
INTERVALS = (10, 100)
INTERVAL = "delta.checkpointInterval"
RS_OPENS = 10


def mean(rows: list[tuple[float, float, float]], i: int) -> float:
    return sum(r[i] for r in rows) / len(rows) if rows else float("nan")


def checkpointed(path: Path, version: int) -> bool:
    return (path / "_delta_log" / f"{version:020d}.checkpoint.parquet").exists()


def delta_rs_open(path: Path) -> tuple[float, float]:
    """(wall s, driver CPU s) of opening the table with delta-rs, the mean of RS_OPENS."""
    from deltalake import DeltaTable

    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(RS_OPENS):
        DeltaTable(str(path)).version()
    return (time.perf_counter() - t0) / RS_OPENS, (time.process_time() - c0) / RS_OPENS


def timed_version(read) -> tuple[float, float]:
    """(wall s, driver CPU s) of `read().version()`."""
    c0, t0 = time.process_time(), time.perf_counter()
    read().version()
    return time.perf_counter() - t0, time.process_time() - c0


def one_table(spark, path: Path, interval: int, commits: int, rows: int) -> dict:
    from deltalake import DeltaTable

    from streams.delta import DeltaTarget, write_batch
    from streams.delta.commit import KeptTable
    from streams.delta.target import TABLE_CONFIGURATION

    writer = spark.range(0).write.format("delta")
    for key, value in {**TABLE_CONFIGURATION, INTERVAL: str(interval)}.items():
        writer = writer.option(key, value)
    writer.save(str(path))
    target = DeltaTarget(str(path), app_id="bench:q", engine="native")

    def append(b: int) -> None:
        write_batch(spark.range(b * rows, (b + 1) * rows), b, target)

    for b in range(WARM_UP):
        append(b)
    kept = KeptTable(str(path))
    kept.get()
    timed, opens, updates, idle, rs_idle = [], [], [], [], []
    for b in range(WARM_UP, commits):
        if b == commits - 1:
            rs = delta_rs_open(path)
            spark_read = cost_per_call(
                spark, lambda _: spark.read.format("delta").load(str(path)).count(), [0]
            )
        timed.append((b + 1, *cost_per_call(spark, append, [b])))
        updates.append(timed_version(kept.get))
        opens.append(timed_version(lambda: DeltaTable(str(path))))
        idle.append(timed_version(kept.get))
        table = kept.get()
        rs_idle.append(timed_version(lambda t=table: t.update_incremental() or t))
    count = spark.read.format("delta").load(str(path)).count()
    assert count == commits * rows, count
    assert DeltaTable(str(path)).metadata().configuration[INTERVAL] == str(interval)
    ck = [r[1:] for r in timed if checkpointed(path, r[0])]
    plain = [r[1:] for r in timed if not checkpointed(path, r[0])]
    return {
        "all": [r[1:] for r in timed],
        "checkpoint": ck,
        "plain": plain,
        "rs": rs,
        "opens": opens,
        "updates": updates,
        "idle": idle,
        "rs_idle": rs_idle,
        "spark_read": spark_read,
        "checkpoints": len(ck),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=10)
    args = ap.parse_args()
    if args.commits <= WARM_UP + 1:
        ap.error(f"--commits must be more than {WARM_UP + 1}")

    with bench_run("native-checkpoint-bench") as (spark, work):
        for rnd in range(1, args.rounds + 1):
            order = INTERVALS if rnd % 2 else tuple(reversed(INTERVALS))
            got = {
                i: one_table(spark, work / f"r{rnd}-{i}", i, args.commits, args.rows) for i in order
            }
            for interval in INTERVALS:
                g = got[interval]
                parts = []
                for name in ("all", "checkpoint", "plain"):
                    rows = g[name]
                    label = {
                        "all": "per append",
                        "checkpoint": "a checkpointing append",
                        "plain": "the others",
                    }[name]
                    parts.append(
                        f"{label} {mean(rows, 0) * 1000:.0f} ms, JVM CPU "
                        f"{mean(rows, 1) * 1000:.0f} ms, {mean(rows, 2):.1f} jobs"
                    )
                (rw, rc), (sw, sc, sj) = g["rs"], g["spark_read"]
                ow, oc, uw, uc, iw, ic, dw, dc = (
                    mean(g[k], i) * 1000
                    for k in ("opens", "updates", "idle", "rs_idle")
                    for i in (0, 1)
                )
                print(
                    f"round {rnd}: every {interval} commits ({g['checkpoints']} checkpoints "
                    f"in {len(g['all'])} timed appends): "
                    + "; ".join(parts)
                    + f". At version {args.commits - 1}: delta-rs opens it in "
                    f"{rw * 1000:.1f} ms ({rc * 1000:.1f} ms CPU); Spark's first count "
                    f"{sw * 1000:.0f} ms, JVM CPU {sc * 1000:.0f} ms, {sj:.0f} jobs. After "
                    f"each append: delta-rs opens it in {ow:.1f} ms ({oc:.1f} ms CPU), a "
                    f"kept table reads the new commit in {uw:.1f} ms ({uc:.1f} ms CPU); "
                    f"with none new, the kept table answers in {iw:.2f} ms ({ic:.2f} ms "
                    f"CPU), delta-rs's update_incremental in {dw:.1f} ms ({dc:.1f} ms CPU)",
                    flush=True,
                )
            a, b = (mean(got[i]["all"], 1) for i in INTERVALS)
            print(f"round {rnd}: JVM CPU per append, every 10 / every 100: {a / b:.2f}", flush=True)


if __name__ == "__main__":
    main()
