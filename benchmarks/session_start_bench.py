"""A local session's start, with the class archive `warehouse jars fetch` made and without.

Each run is a fresh process, as a `warehouse` command or a crash test's restart is: it
starts a session the way the framework does (`bench_session.local_session`: `local[2]`,
the framework's local settings, the cached native jars), then does a first piece of
work (a Delta write, a read, a MERGE, a streaming query from Delta to Delta run once),
stops, and waits for its JVM to exit. "without" names `-Xshare:auto` (Java's own
default) in the driver's Java options, which keeps the framework's archive out as any
class-data option of the user's does (`warehouse.runtime.class_archive`). The cases
alternate, the order reversed every round. Each run prints the session's start, the
first work and the process's whole wall time and CPU (Python and the JVM, from
`getrusage` of the child).

`--test-jvm` runs both cases again with the test suite's Java options
(`JDK_JAVA_OPTIONS`, tests/conftest.py: C1 only, the serial collector).

    flock /tmp/warehouse-bench.lock .venv/bin/python benchmarks/session_start_bench.py --rounds 3 --test-jvm
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
began = time.perf_counter()
from bench_session import local_session
spark = local_session("session-start")
started = time.perf_counter()
from delta.tables import DeltaTable
root = Path(sys.argv[2])
t, u = str(root / "t"), str(root / "u")
df = spark.range(100).selectExpr("id", "cast(id AS string) AS v")
df.write.format("delta").save(t)
assert spark.read.format("delta").load(t).count() == 100
(DeltaTable.forPath(spark, t).alias("t").merge(df.alias("s"), "t.id = s.id")
 .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
stream = spark.readStream.format("delta").load(t).writeStream.format("delta")
stream.option("checkpointLocation", str(root / "c")).trigger(availableNow=True).start(u) \
    .awaitTermination()
assert spark.read.format("delta").load(u).count() == 100
worked = time.perf_counter()
options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", "")
jvm = spark.sparkContext._gateway.proc
spark.stop()
jvm.stdin.close()
jvm.wait(timeout=300)
print("RESULT " + json.dumps({"start": started - began, "work": worked - started,
      "archive": "SharedArchiveFile" in options}), flush=True)
"""

TEST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def run(case: str, test_jvm: bool) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("BENCH_JAVA_OPTIONS", None)
    if case == "without":
        env["BENCH_JAVA_OPTIONS"] = "-Xshare:auto"
    if test_jvm:
        env["JDK_JAVA_OPTIONS"] = TEST_JVM
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="session-start-") as scratch:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(HERE), scratch],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        sys.exit(f"{case}: the run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(line[len("RESULT ") :])
    if result.pop("archive") != (case == "with"):
        sys.exit(f"{case}: the archive was {'not ' if case == 'with' else ''}used")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**result, "wall": wall, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--test-jvm", action="store_true", help="also with the tests' JVM")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    settings = [False, True] if args.test_jvm else [False]
    for test_jvm in settings:
        label = "the tests' JVM (C1, serial collector)" if test_jvm else "Java's defaults"
        results: dict[str, list[dict[str, float]]] = {"with": [], "without": []}
        for r in range(args.rounds):
            order = ["with", "without"] if r % 2 == 0 else ["without", "with"]
            for case in order:
                res = run(case, test_jvm)
                results[case].append(res)
                print(
                    f"{label}, round {r + 1}, {case} the archive: session {res['start']:.2f} s,"
                    f" first work {res['work']:.2f} s, process {res['wall']:.2f} s wall,"
                    f" {res['cpu']:.2f} s CPU",
                    flush=True,
                )
        print(f"\n{label}, medians of {args.rounds} rounds:")
        print("| case | session start | first work | process wall | process CPU |")
        print("|---|---|---|---|---|")
        med = {
            case: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            for case, runs in results.items()
        }
        for case in ("without", "with"):
            m = med[case]
            print(
                f"| {case} the archive | {m['start']:.2f} s | {m['work']:.2f} s |"
                f" {m['wall']:.2f} s | {m['cpu']:.2f} s |"
            )
        ratio = med["with"]["wall"] / med["without"]["wall"]
        print(
            f"with / without: wall {ratio:.2f},"
            f" CPU {med['with']['cpu'] / med['without']['cpu']:.2f}\n",
            flush=True,
        )
    print(f"load average at end: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
