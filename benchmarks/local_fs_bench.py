"""Processes and CPU of small streaming batches on a local master: Spark's, Delta's and
Hadoop's defaults for writing checkpoints, Delta commits and files against the
framework's.

    .venv/bin/python benchmarks/local_fs_bench.py [--batches 40] [--rounds 2]

Each case runs in a JVM of its own (Delta reads its log store setting once per JVM); in
each round both run, one after the other, the first alternating. A case starts a session
as the framework does (`bench_session.local_session`); the `hadoop-fs` case sets Hadoop's
own local file system back (`fs.file.impl`, `warehouse/runtime/local_fs.py`), and the
`defaults` case also Spark's `FileContext` checkpoint writer and Delta's `HDFSLogStore`.
It runs a streaming
aggregation (state, offsets, commits) into a Delta table, one small input file per
micro-batch, first 5 batches to warm up, then `--batches`, and reports per measured
batch: the processes the JVM started (its flight recorder's `jdk.ProcessStart`), by
command; the CPU of the JVM and of the processes it waited for (utime, stime, cutime and
cstime from /proc); the wall time.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_session import local_session
from proc_cpu import proc_stat

HADOOP_FS = {"spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem"}
CASES = {
    "defaults": {
        "spark.sql.streaming.checkpointFileManagerClass": "org.apache.spark.sql.execution."
        "streaming.checkpointing.FileContextBasedCheckpointFileManager",
        "spark.delta.logStore.file.impl": "io.delta.storage.HDFSLogStore",
        **HADOOP_FS,
    },
    "hadoop-fs": HADOOP_FS,
    "framework": {},
}
WARM_UP = 5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", choices=sorted(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_case(args.child, args.batches)), flush=True)
        return 0
    results: dict[str, list[dict]] = {name: [] for name in CASES}
    for rnd in range(args.rounds):
        order = list(CASES) if rnd % 2 == 0 else list(reversed(CASES))
        for name in order:
            out = subprocess.run(
                [sys.executable, __file__, "--child", name, "--batches", str(args.batches)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            got = json.loads(out.strip().splitlines()[-1])
            results[name].append(got)
            print(f"round {rnd + 1}, {name}: {line(got)}", flush=True)
    print("\nper measured batch, mean of the rounds:")
    for name, runs in results.items():
        print(f"  {name}: {line(mean(runs))}")
    ours = mean(results["framework"])
    for name in ("defaults", "hadoop-fs"):
        base = mean(results[name])
        print(
            f"framework / {name}: CPU {ours['cpu_ms'] / base['cpu_ms']:.2f}, "
            f"wall {ours['wall_ms'] / base['wall_ms']:.2f}"
        )
    return 0


def line(r: dict) -> str:
    started = ", ".join(f"{n:.1f} {cmd}" for cmd, n in sorted(r["started"].items())) or "none"
    return f"{r['cpu_ms']:.0f} ms CPU, {r['wall_ms']:.0f} ms wall, processes started: {started}"


def mean(runs: list[dict]) -> dict:
    cmds = {c for r in runs for c in r["started"]}
    return {
        "cpu_ms": sum(r["cpu_ms"] for r in runs) / len(runs),
        "wall_ms": sum(r["wall_ms"] for r in runs) / len(runs),
        "started": {c: sum(r["started"].get(c, 0) for r in runs) / len(runs) for c in cmds},
    }


def run_case(name: str, batches: int) -> dict:
    spark = local_session("local-fs-bench", CASES[name])
    jvm = spark._jvm
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    work = Path(tempfile.mkdtemp(prefix="local-fs-bench-"))
    try:
        run(spark, inputs(spark, work / "warm", WARM_UP))
        measured = inputs(spark, work / "measured", batches)
        recording = jvm.jdk.jfr.Recording()
        recording.enable("jdk.ProcessStart")
        recording.start()
        cpu0, t0 = jvm_cpu(pid), time.monotonic()
        ran = run(spark, measured)
        cpu1, t1 = jvm_cpu(pid), time.monotonic()
        recording.stop()
        dump = jvm.java.io.File(str(work / "processes.jfr")).toPath()
        recording.dump(dump)
        recording.close()
        events = jvm.jdk.jfr.consumer.RecordingFile.readAllEvents(dump)
        started = collections.Counter(str(e.getString("command")).split()[0] for e in events)
        return {
            "cpu_ms": (cpu1 - cpu0) / ran * 1000,
            "wall_ms": (t1 - t0) / ran * 1000,
            "started": {cmd: n / ran for cmd, n in started.items()},
        }
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def inputs(spark, root: Path, batches: int) -> Path:
    """`batches` input files of 100 rows under `root`/source; returns `root`."""
    for i in range(batches):
        rows = spark.range(i * 100, (i + 1) * 100).selectExpr("id % 7 AS k").coalesce(1)
        rows.write.mode("append").parquet(str(root / "source"))
    return root


def run(spark, root: Path) -> int:
    """Run `root`'s inputs through a stateful query into a Delta table, one file per
    micro-batch; returns the batches it ran."""
    query = (
        spark.readStream.schema("k long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(root / "source"))
        .groupBy("k")
        .count()
        .writeStream.format("delta")
        .outputMode("complete")
        .option("checkpointLocation", str(root / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(root / "table"))
    )
    query.awaitTermination()
    return int(query.lastProgress["batchId"]) + 1


def jvm_cpu(pid: int) -> float:
    """CPU seconds of the JVM and of the children it waited for."""
    _, fields = proc_stat(f"/proc/{pid}/stat")
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    sys.exit(main())
