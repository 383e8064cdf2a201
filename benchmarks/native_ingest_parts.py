"""Where a native ODS ingest's time goes: Spark's own Kafka → JSON → Delta pipeline in
steps, the framework's parse in its two passes, and the framework's ODS table.

    flock /tmp/warehouse-bench.lock .venv/bin/python benchmarks/native_ingest_parts.py \\
        [--records 1000000] [--rounds 2]

One SparkSession (as the CLI starts its sessions, local[2], the cached native jars) and
a bundled broker with two topics of `--records` JSON records (~183 B, 4 partitions, as
`kafka_ingest_bench.py --sizes` produces them): `dirty`, where one record in a thousand
is cut off (it does not parse) and one in a thousand has a null `order_id`, and `clean`,
without either. Each round runs, each as one batch over a whole topic:

- (1) Spark's Kafka source → `noop`;
- (2) + `from_json` of the value → `noop`;
- (3) + `from_json` → a Delta table (delta-spark, a plain overwrite);
- (4) `streams.kafka.parse_kafka` of `dirty`, its good rows → `noop` (a one-pass batch's
  write, without the writer);
- (5) the same parse, its bad rows counted (the quarantine's second pass: the batch read
  and parsed again for the rows the first pass flagged);
- (6)/(7) the framework's native ODS table (`format: json`, `append`, no expectation) on
  Spark's own path (`engines: {parse: spark}`: not the Arrow path a local session
  takes), run once by the runner on `clean` and on `dirty`;
- (8) the same table with `expect_column_values_to_not_be_null: {column: order_id},
  on_violation: quarantine`, on `dirty` (both kinds of quarantine rows).

Round 1 is the JVM's first full-size run, with its JIT compiling; later rounds are the
steady state. Printed per case: rows/s, wall seconds, CPU per 1M records (user + system
of this process tree from /proc, by process kind). After the last round, Spark's jobs of
the last (7) and (8), from the session's event log: start, wall time and last stage. Not a
test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ingest_runs import CpuMeter, cpu_line
from kafka_ingest_sizes import ods_run, produce

DDL = "order_id bigint, user_id bigint, amount double, city string, note string"


def session(events: Path):
    """The benchmarks' session, logging Spark's events (uncompressed) under `events`."""
    from bench_session import local_session

    conf = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(events),
        "spark.eventLog.compress": "false",
    }
    return local_session("native-parts", conf)


def jobs_since(events: Path, since_ms: float) -> list[tuple[float, float, str]]:
    """(start s after `since_ms`, wall s, last stage's name) of every job started since."""
    started: dict[int, list] = {}
    for f in sorted(glob.glob(str(events / "**" / "*"), recursive=True)):
        if not os.path.isfile(f):
            continue
        for line in open(f):
            e = json.loads(line)
            if e["Event"] == "SparkListenerJobStart" and e["Submission Time"] >= since_ms:
                stages = e.get("Stage Infos") or [{"Stage Name": ""}]
                started[e["Job ID"]] = [e["Submission Time"], None, stages[-1]["Stage Name"]]
            elif e["Event"] == "SparkListenerJobEnd" and e["Job ID"] in started:
                started[e["Job ID"]][1] = e["Completion Time"]
    return [
        ((s - since_ms) / 1000, ((t or s) - s) / 1000, name)
        for _, (s, t, name) in sorted(started.items())
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--size", type=int, default=200)
    args = ap.parse_args()

    from pyspark.sql import functions as F

    from streams.broker.launcher import BrokerProcess
    from streams.kafka import parse_kafka

    n = args.records
    work = Path(tempfile.mkdtemp(prefix="native-parts-"))
    events = work / "events"
    events.mkdir()
    broker = BrokerProcess(work / "broker").start()
    spark = None
    try:
        dirty, clean = f"parts-dirty-{os.getpid()}", f"parts-clean-{os.getpid()}"
        produce(broker.bootstrap, dirty, n, args.size, 4)
        produce(broker.bootstrap, clean, n, args.size, 4, clean=True)
        spark = session(events)

        def source(topic: str):
            return (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .load()
            )

        def parsed(topic: str):
            return source(topic).select(F.from_json(F.col("value").cast("string"), DDL).alias("j"))

        def noop(df) -> None:
            df.write.format("noop").mode("overwrite").save()

        def cases(out: Path) -> list[tuple[str, Callable[[], object]]]:
            return [
                ("(1) Kafka source -> noop", lambda: noop(source(dirty))),
                ("(2) + from_json -> noop", lambda: noop(parsed(dirty).select("j.*"))),
                (
                    "(3) + from_json -> Delta",
                    lambda: (
                        parsed(dirty)
                        .select("j.*")
                        .write.format("delta")
                        .mode("overwrite")
                        .save(str(out / "delta"))
                    ),
                ),
                (
                    "(4) parse_kafka good -> noop",
                    lambda: noop(parse_kafka(source(dirty), format="json", schema=DDL).good),
                ),
                (
                    "(5) parse_kafka bad -> count",
                    lambda: parse_kafka(source(dirty), format="json", schema=DDL).bad.count(),
                ),
                (
                    "(6) framework ODS table, clean",
                    lambda: ods_run(
                        spark, broker.bootstrap, clean, out, "native/spark", False, None
                    ),
                ),
                (
                    "(7) framework ODS table, dirty",
                    lambda: ods_run(
                        spark, broker.bootstrap, dirty, out, "native/spark", False, None
                    ),
                ),
                (
                    "(8) + not-null quarantine, dirty",
                    lambda: ods_run(
                        spark, broker.bootstrap, dirty, out, "native/spark", True, None
                    ),
                ),
            ]

        started: dict[str, float] = {}
        for r in range(1, args.rounds + 1):
            print(f"-- round {r}", flush=True)
            for label, run in cases(work / f"round-{r}"):
                started[label[:3]] = time.time() * 1000
                meter = CpuMeter().start()
                t0 = time.perf_counter()
                run()
                dt = time.perf_counter() - t0
                print(
                    f"{label:<34} {n / dt:>9,.0f} rows/s {dt:6.1f} s  {cpu_line(meter.stop(), n)}",
                    flush=True,
                )
        spark.stop()
        spark = None
        for case, until in (("(7)", started["(8)"]), ("(8)", float("inf"))):
            print(f"-- Spark jobs of the last {case}: start, wall, last stage")
            for start, wall, name in jobs_since(events, started[case]):
                if started[case] + start * 1000 < until:
                    print(f"  +{start:6.2f} s {wall:6.2f} s  {name[:90]}")
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
