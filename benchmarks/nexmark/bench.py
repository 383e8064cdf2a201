"""Nexmark throughput: each query's events per second through the framework beside a
hand-written Structured Streaming job of the same query, in one run, as ratios.

    flock /tmp/warehouse-bench.lock .venv/bin/python benchmarks/nexmark/bench.py \\
        [--events 200000] [--rate 1000] [--seed 1] [--partitions 2] \\
        [--engines python,native] [--queries q0,q1,q2,q3,q4,q5,q7,q8] [--rounds 1] [--no-cli]

Starts the bundled broker, produces `--events` of the generator's events (topics `person`,
`auction`, `bid`), and in one local[2] SparkSession (the CLI's, `bench_session.py`), for
each query:

- (h) the hand-written job: Spark's `kafka` source, `from_json`, the query in Spark SQL,
  delta-spark's sink (`format("delta")` appends; q7 through `foreachBatch` with a Delta
  MERGE by window; q4's average and q5's hot auctions recomputed in the `foreachBatch` of a
  complete-mode aggregate), run with `Trigger.AvailableNow` from a fresh checkpoint; one
  streaming query, two for q4 (its join written to Delta first: Structured Streaming
  cannot aggregate a stream-stream join in update or complete mode);
- (f) the framework on each of `--engines`: the project's ODS tables the query reads and its
  own tables, fresh warehouse root, `project.pipeline(spark, tables=...).run(once=True)`
  (what `warehouse run --table ... --once` runs, without the JVM's start). On the python
  engine the same hand-written job is the baseline: there is no hand-written job on the
  Python data sources a Spark user would write instead of Spark's own connector;
- (c) unless `--no-cli`, as a user runs it: `warehouse run --refresh <the same tables>
  --once` in a fresh process, its JVM's start included.

A query's events are the records of the topics it reads (q0-q2, q7: bids; q3, q8: persons
and auctions; q4: auctions and bids); events/s = those records / wall seconds of the run,
query start included. Before the measured queries, each side runs q0 once (JIT warm-up).
After each run (not timed) the result is checked against DuckDB's answer
(`reference.py`); a mismatch stops the benchmark. Printed: per query and engine, events/s
of (h) and (f) and the ratio f/h (>= 1: the framework is faster); with `--rounds N` the
fastest of N runs of each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from benchmarks.nexmark import reference  # noqa: E402
from benchmarks.nexmark.generator import generate, produce_events, write_ndjson  # noqa: E402

PROJECT = HERE / "project"
READS = {
    "q0": ["bid"],
    "q1": ["bid"],
    "q2": ["bid"],
    "q3": ["auction", "person"],
    "q4": ["auction", "bid"],
    "q5": ["bid"],
    "q7": ["bid"],
    "q8": ["auction", "person"],
}
TABLES = {
    "q0": ["ods_bid", "q0"],
    "q1": ["ods_bid", "q1"],
    "q2": ["ods_bid", "q2"],
    "q3": ["ods_auction", "ods_person", "q3"],
    "q4": ["ods_auction", "ods_bid", "q4_bids", "q4_final", "q4"],
    "q5": ["ods_bid", "q5_counts", "q5"],
    "q7": ["ods_bid", "q7"],
    "q8": ["ods_auction", "ods_person", "q8"],
}
"""The framework's tables for each query, in run order: the ODS tables it reads, its own."""

HAND_SQL = {
    "q0": "SELECT auction, bidder, price, date_time, extra FROM bid",
    "q1": "SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q3": (
        "SELECT p.name, p.city, p.state, a.id FROM auction a JOIN person p ON a.seller = p.id "
        "WHERE a.category = 10 AND p.state IN ('OR', 'ID', 'CA')"
    ),
    "q8": (
        "SELECT p.id, p.name, "
        "timestamp_millis(floor(unix_millis(p.date_time) / 10000) * 10000) AS starttime "
        "FROM person p JOIN auction a ON p.id = a.seller "
        "AND floor(unix_millis(p.date_time) / 10000) = floor(unix_millis(a.date_time) / 10000)"
    ),
}


def schema_ddl(kind: str) -> str:
    types = {"BIGINT": "BIGINT", "VARCHAR": "STRING", "TIMESTAMP": "TIMESTAMP"}
    return ", ".join(f"{c} {types[t]}" for c, t in reference.SCHEMAS[kind].items())


class Hand:
    """The hand-written jobs, one streaming query (two for q4) per run."""

    def __init__(self, spark, bootstrap: str, work: Path) -> None:
        self.spark = spark
        self.bootstrap = bootstrap
        self.work = work

    def _kafka(self, kind: str):
        from pyspark.sql import functions as F

        raw = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", kind)
            .option("startingOffsets", "earliest")
            .load()
        )
        return raw.select(
            F.from_json(F.col("value").cast("string"), schema_ddl(kind)).alias("e")
        ).select("e.*")

    def _await(self, writer, path: Path, *, to_path: bool = True) -> None:
        """Run `writer` to the end of the topics; `to_path`: its sink is the table at `path`
        (else its `foreachBatch` writes)."""
        writer = writer.option("checkpointLocation", str(path) + "._checkpoint")
        writer = writer.trigger(availableNow=True)
        q = writer.start(str(path)) if to_path else writer.start()
        q.awaitTermination()
        if q.exception() is not None:
            raise RuntimeError(f"hand-written job for `{path.name}` failed: {q.exception()}")

    def _merge_into(self, path: Path, keys: list[str]):
        from delta.tables import DeltaTable

        def write(batch, batch_id: int) -> None:
            if not DeltaTable.isDeltaTable(self.spark, str(path)):
                batch.write.format("delta").save(str(path))
                return
            cond = " AND ".join(f"t.{k} = s.{k}" for k in keys)
            (
                DeltaTable.forPath(self.spark, str(path))
                .alias("t")
                .merge(batch.alias("s"), cond)
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )

        return write

    def run(self, query: str, root: Path) -> dict[str, Path]:
        for kind in READS[query]:
            self._kafka(kind).createOrReplaceTempView(kind)
        out = root / query
        if query in HAND_SQL:
            df = self.spark.sql(HAND_SQL[query])
            if query == "q8":
                df = df.dropDuplicates(["id", "starttime"])
            self._await(df.writeStream.format("delta").outputMode("append"), out)
        elif query == "q7":
            from pyspark.sql import functions as F

            bids = self.spark.table("bid").withWatermark("date_time", "10 seconds")
            top = (
                bids.groupBy(F.window("date_time", "10 seconds").alias("w"))
                .agg(
                    F.max("price").alias("price"),
                    F.expr(
                        "filter(collect_list(named_struct('auction', auction, 'bidder', bidder,"
                        " 'price', price, 'date_time', date_time, 'extra', extra)),"
                        " b -> b.price = max(price))"
                    ).alias("bids"),
                )
                .select(F.col("w.start").alias("window_start"), "price", "bids")
            )
            writer = top.writeStream.outputMode("update").foreachBatch(
                self._merge_into(out, ["window_start"])
            )
            self._await(writer, out, to_path=False)
        elif query == "q4":
            bids_path = root / "q4_bids"
            joined = self.spark.sql(
                "SELECT a.id AS auction, a.category, b.price FROM auction a JOIN bid b "
                "ON a.id = b.auction AND b.date_time BETWEEN a.date_time AND a.expires"
            )
            self._await(joined.writeStream.format("delta").outputMode("append"), bids_path)
            finals = (
                self.spark.readStream.format("delta")
                .load(str(bids_path))
                .groupBy("auction", "category")
                .agg({"price": "max"})
                .withColumnRenamed("max(price)", "final")
            )

            def averages(batch, batch_id: int) -> None:
                # Complete mode: every batch holds every auction's final price so far.
                (
                    batch.groupBy("category")
                    .agg({"final": "avg"})
                    .withColumnRenamed("avg(final)", "avg_final")
                    .write.format("delta")
                    .mode("overwrite")
                    .save(str(out))
                )

            writer = finals.writeStream.outputMode("complete").foreachBatch(averages)
            self._await(writer, root / "q4_final", to_path=False)
        elif query == "q5":
            from pyspark.sql import functions as F

            counts = (
                self.spark.table("bid")
                .groupBy(F.window("date_time", "10 seconds", "2 seconds").alias("w"), "auction")
                .count()
                .select(
                    F.col("w.start").alias("window_start"), "auction", F.col("count").alias("num")
                )
            )

            def hot(batch, batch_id: int) -> None:
                # Complete mode: every batch holds every window's counts so far.
                top = batch.groupBy("window_start").agg(F.max("num").alias("num"))
                (
                    batch.join(top, ["window_start", "num"])
                    .groupBy("window_start", "num")
                    .agg(F.array_sort(F.collect_list("auction")).alias("auctions"))
                    .write.format("delta")
                    .mode("overwrite")
                    .save(str(out))
                )

            writer = counts.writeStream.outputMode("complete").foreachBatch(hot)
            self._await(writer, root / "q5_counts", to_path=False)
        return {query: out}


def project_conf() -> dict[str, str]:
    """The Spark settings of the project's `conf/local.yml` (`spark.conf`)."""
    from warehouse import Project

    return dict(Project.load(PROJECT, environ={}).config.spark.conf)


def framework(spark, bootstrap: str, engine: str, query: str, root: Path) -> dict[str, Path]:
    from warehouse import Project

    project = Project.load(
        PROJECT,
        environ={},
        warehouse_root=str(root),
        kafka={"bootstrap": bootstrap},
        engines={"kafka": engine, "delta": engine},
    )
    project.pipeline(spark, tables=TABLES[query], progress=lambda _: None).run(once=True)
    return {query: project.table_path(query)}


def cli(work: Path, bootstrap: str, engine: str, query: str, root: Path) -> dict[str, Path]:
    """(c) As a user runs it: `warehouse run --refresh <the query's tables> --once` in a
    fresh process (its JVM's start included), on a copy of the project whose
    `conf/bench.yml` names the broker, `root` and `engine`."""
    project = work / "project"
    if not project.exists():
        shutil.copytree(PROJECT, project)
    local = (PROJECT / "conf" / "local.yml").read_text()
    conf = local.replace("warehouse_root: .warehouse", f"warehouse_root: {root}")
    conf = conf.replace("bootstrap: embedded", f"bootstrap: {bootstrap}")
    conf = conf.replace(
        "engines: {kafka: auto, delta: auto}", f"engines: {{kafka: {engine}, delta: {engine}}}"
    )
    (project / "conf" / "bench.yml").write_text(conf)
    command = [str(Path(sys.executable).with_name("warehouse")), "run", "--project", str(project)]
    command += ["--env", "bench", "--refresh", ",".join(TABLES[query]), "--once"]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(
            f"warehouse run ({engine}) {query}: exit {run.returncode}\n{run.stderr[-3000:]}"
        )
    from warehouse.spec.paths import table_path

    return {query: Path(table_path(root, query))}


def check(query: str, path: Path, expected: dict[str, list[tuple]], who: str) -> None:
    from streams.delta.arrow import read_table

    rows = reference.project_rows(query, read_table(str(path)).to_pylist())
    if rows != expected[query]:
        raise SystemExit(
            f"{who} {query}: {len(rows)} rows differ from DuckDB's {len(expected[query])}"
        )


def timed(fn, *args) -> tuple[float, dict[str, Path]]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--engines", default="python,native")
    parser.add_argument("--queries", default=",".join(READS))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--no-cli", action="store_true", help="leave out (c): `warehouse run` in a fresh process"
    )
    args = parser.parse_args(argv)
    engines = args.engines.split(",")
    queries = args.queries.split(",")

    from bench_session import local_session

    from streams.broker.launcher import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="nexmark-bench-"))
    broker = BrokerProcess(work / "broker").start()
    spark = None
    try:
        events = generate(args.events, seed=args.seed, rate=args.rate)
        counts = {"person": len(events.person), "auction": len(events.auction)}
        counts["bid"] = len(events.bid)
        produce_events(broker.bootstrap, events, partitions=args.partitions)
        expected = reference.compute(write_ndjson(events, work / "events"))
        del events
        print(
            f"{args.events} events ({counts}), seed {args.seed}, {args.partitions} partition(s)"
            f", load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        # The project's own session settings (its 3 GiB heap among them), as (c) gets them:
        # both sides share this session, and a `--once` run's stopped stateful queries keep
        # their state until Spark's next maintenance (README, "The benchmark").
        spark = local_session("nexmark-bench", project_conf())
        hand = Hand(spark, broker.bootstrap, work)
        runs = 0

        def root() -> Path:
            nonlocal runs
            runs += 1
            return work / f"run-{runs}"

        hand.run("q0", root())  # warm-up
        for engine in engines:
            framework(spark, broker.bootstrap, engine, "q0", root())
        print(
            f"{'query':<6}{'events':>9}{'hand ev/s':>12}"
            + "".join(f"{e + ' ev/s':>14}{'ratio':>7}" for e in engines)
            + (
                ""
                if args.no_cli
                else "".join(f"{e + ' CLI ev/s':>16}{'ratio':>7}" for e in engines)
            ),
            flush=True,
        )
        for q in queries:
            n = sum(counts[k] for k in READS[q])
            best: dict[str, float] = {}
            for _ in range(args.rounds):
                secs, out = timed(hand.run, q, root())
                check(q, out[q], expected, "hand-written")
                best["hand"] = min(best.get("hand", secs), secs)
                for engine in engines:
                    secs, out = timed(framework, spark, broker.bootstrap, engine, q, root())
                    check(q, out[q], expected, f"framework ({engine})")
                    best[engine] = min(best.get(engine, secs), secs)
                    if args.no_cli:
                        continue
                    secs, out = timed(cli, work, broker.bootstrap, engine, q, root())
                    check(q, out[q], expected, f"warehouse run ({engine})")
                    best[f"{engine} cli"] = min(best.get(f"{engine} cli", secs), secs)
            line = f"{q:<6}{n:>9,}{n / best['hand']:>12,.0f}"
            for engine in engines:
                line += f"{n / best[engine]:>14,.0f}{best['hand'] / best[engine]:>7.2f}"
            for engine in [] if args.no_cli else engines:
                secs = best[f"{engine} cli"]
                line += f"{n / secs:>16,.0f}{best['hand'] / secs:>7.2f}"
            print(line, flush=True)
        print(f"load average at end: {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        try:
            if spark is not None:
                spark.stop()  # raises when the JVM died (out of heap, say)
        finally:
            broker.stop()
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
