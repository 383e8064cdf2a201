"""Kafka -> Spark/Delta ingest benchmark: the framework's source against a bare consumer.

    .venv/bin/python benchmarks/kafka_ingest_bench.py [--records 1000000] [--size 200]
        [--partitions 4] [--bootstrap HOST:PORT] [--rounds 2] [--skip b,c,d,k]
        [--engines python,native] [--jvm-threads]
    .venv/bin/python benchmarks/kafka_ingest_bench.py --sizes 100000,3100000 [--engines ...]

Starts the bundled broker (unless `--bootstrap`), produces the records once, then in
one run measures on the same topic:
  (a) a bare confluent-kafka consumer reading every record (values touched),
  (b) read_kafka_stream -> `noop` sink, Trigger.AvailableNow,
  (c) read_kafka_stream -> Delta through streams.delta.write_batch in foreachBatch,
  (d) delta-rs `write_deltalake` of the same records as one Arrow table, no Spark,
  (e) the framework itself: an ODS table spec (JSON with a schema, malformed records to
      quarantine) compiled and run once (`project.pipeline(spark, "ods")`), on each
      engine of `--engines` (python: our Kafka source and Delta writer; native: Spark's
      `kafka` format and delta-spark; `native/spark`: the native ones with
      `engines: {parse: spark}`, so Spark's `from_json` and writer instead of the Arrow
      path both engines take for this table),
  (q) the same table with a not-null expectation that quarantines, on each engine,
  (k) kcat (`kcat -C -e -o beginning`), a C consumer, reading the whole topic,
and prints rows/s and the ratio of each to (a) and (k). (b), (c) and (e) run `--rounds` times
each over the whole topic: round 1 is the JVM's first full-size run of each (its JIT still
compiling), later rounds are the steady state of a long-running stream. (a) runs
again before each later round, and every case's ratio is to its own round's (a): the
bare consumer's rate drifts by up to a quarter between runs minutes apart here. Not a
test: nothing is asserted.

`--sizes SMALL,LARGE` is another mode (`benchmarks/kafka_ingest_sizes.py`): (k), (e) and (q)
on a topic of each size, with malformed records and null keys, every row of each table
and its quarantine checked, peak memory per process, and the marginal rate between the
sizes against kcat's.

Beside each wall-clock rate it prints the CPU the case used (user + system seconds of
this process and every process under it, read from /proc: the JVM, Spark's Python
workers, librdkafka's threads; the broker's separately), per million records. CPU per
record moves much less with the machine's load than wall time, and says what a case
would need on a given number of cores. `--jvm-threads` splits the JVM's CPU by thread:
Spark's tasks, the JIT compilers, the garbage collector, the rest.
`BENCH_JAVA_OPTIONS` in the environment is passed to the JVM
(`spark.driver.extraJavaOptions`), e.g. `-XX:StartFlightRecording=filename=e.jfr,settings=profile`
for a profile of where the tasks spend their time (`jfr print --events jdk.ExecutionSample`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


from ingest_runs import CpuMeter, batch_times, cpu_line, engines_line, run_kcat, spark_session


def ods_value(i: int, pad: str) -> bytes:
    """Record `i`'s JSON value, of `ODS_SCHEMA`'s shape, with `pad` as its note."""
    return json.dumps(
        {
            "order_id": i,
            "user_id": i % 9973,
            "amount": (i % 10000) / 100,
            "city": "Oslo",
            "note": pad,
        },
        separators=(",", ":"),
    ).encode()


def produce_records(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    from confluent_kafka import Producer

    from streams.kafka import ensure_topic

    ensure_topic(bootstrap, topic, partitions=partitions)
    pad = "x" * max(0, size - 90)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
        }
    )
    failed: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failed.append(err.str())

    for i in range(records):
        value = ods_value(i, pad)
        while True:
            try:
                producer.produce(
                    topic,
                    value=value,
                    key=str(i).encode(),
                    partition=i % partitions,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(300)
    if failed:
        raise SystemExit(f"producing to `{topic}` failed: {failed[0]}")


def bare_consumer(bootstrap: str, topic: str, partitions: int, total: int) -> tuple[float, int]:
    """(a): the best a Python process does with confluent-kafka: consume, touch values."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            # As the source (streams/kafka/fetch.py): 0 spins librdkafka's fetcher while
            # the queue is full; 2 ms read 2-5% faster here with ~0.7 s less CPU per 1M.
            "fetch.queue.backoff.ms": 2,
            "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 16 << 20,
            "queued.min.messages": 1_000_000,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n = eof = 0
    nbytes = 0
    t0 = time.perf_counter()
    while eof < partitions:
        for m in c.consume(10000, 1.0):
            if m.error() is not None:
                eof += 1
            else:
                nbytes += len(m.value())
                n += 1
    dt = time.perf_counter() - t0
    c.close()
    assert n == total, f"bare consumer read {n} records, expected {total}"
    return dt, nbytes


def run_bare(bootstrap: str, topic: str, args: argparse.Namespace, label: str) -> float:
    """(a) once, printed with its CPU; its seconds."""
    meter = CpuMeter().start()
    dt, nbytes = bare_consumer(bootstrap, topic, args.partitions, args.records)
    print(
        f"(a) {label}: {args.records / dt:>10,.0f} rows/s ({nbytes / args.records:.0f} "
        f"B/record)\n    {cpu_line(meter.stop(), args.records)}",
        flush=True,
    )
    return dt


def run_stream(
    spark, bootstrap: str, topic: str, work: Path, sink: str, split: int
) -> tuple[float, int]:
    from streams.kafka import read_kafka_stream

    df = read_kafka_stream(spark, bootstrap=bootstrap, topics=topic, split_offsets=split)
    cp = work / f"cp-{sink}-{uuid.uuid4().hex[:6]}"
    writer = df.writeStream.option("checkpointLocation", str(cp)).trigger(availableNow=True)
    if sink == "noop":
        writer = writer.format("noop")
    else:
        from streams.delta import DeltaTarget, write_batch

        target = DeltaTarget(
            str(work / f"delta-{cp.name}"), mode="append", app_id=f"bench:{cp.name}"
        )
        writer = writer.foreachBatch(lambda b, i: write_batch(b, i, target))
    t0 = time.perf_counter()
    q = writer.start()
    q.awaitTermination()
    dt = time.perf_counter() - t0
    if q.exception() is not None:
        raise SystemExit(f"{sink} query failed: {q.exception()}")
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    busy = sum(p["durationMs"].get("addBatch", 0) for p in q.recentProgress) / 1000
    return dt, rows, busy


ODS_SCHEMA = {
    "type": "object",
    "properties": {
        "order_id": {"type": "integer"},
        "user_id": {"type": "integer"},
        "amount": {"type": "number"},
        "city": {"type": "string"},
        "note": {"type": "string"},
    },
    "required": ["order_id"],
}

_SPARK_TYPES = {"integer": "bigint", "number": "double", "string": "string"}


def ods_payload():
    """The Arrow schema the landing path types `ODS_SCHEMA`'s records with."""
    from streams.landing.arrow_json import payload_schema

    props = ODS_SCHEMA["properties"]
    return payload_schema([(name, _SPARK_TYPES[p["type"]]) for name, p in props.items()])


NOT_NULL_QUARANTINE = (
    "expectations:\n"
    "  - expect_column_values_to_not_be_null: {column: order_id}\n"
    "    on_violation: quarantine\n"
)


def framework_ods(
    spark, bootstrap: str, topic: str, work: Path, *, engine: str = "python", expect: bool = False
) -> tuple[float, int, float | None]:
    """(e)/(q): what a user's ODS table does: `layers/ods/<t>.yml`, run once by the runner,
    on `engine` (an `engines_line` entry); (q) adds a not-null expectation that
    quarantines, as every ODS table of the bundled example has."""
    from warehouse import Project

    name = f"{topic}-{engine.replace('/', '-')}{'-q' if expect else ''}"
    root = work / f"project-{name}"
    (root / "conf").mkdir(parents=True)
    (root / "schemas").mkdir()
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "conf" / "local.yml").write_text(
        f'warehouse_root: {work / ("wh-" + name)}\nkafka:\n  bootstrap: "{bootstrap}"\n'
        + engines_line(engine)
    )
    (root / "schemas" / "bench.json").write_text(json.dumps(ODS_SCHEMA))
    (root / "layers" / "ods" / "bench.yml").write_text(
        f"table: ods_bench\nsource:\n  kafka: {{topic: {topic}, format: json, schema: bench}}\n"
        "sink: {mode: append}\n" + (NOT_NULL_QUARANTINE if expect else "")
    )
    project = Project.load(root)
    with batch_times(spark) as times:
        t0 = time.perf_counter()
        (result,) = project.pipeline(spark, "ods").run(once=True)
        dt = time.perf_counter() - t0
        busy = times.wait(result.batches)
    return dt, result.rows_written, busy


def bench_cases(args: argparse.Namespace, skip: set[str]) -> list[tuple[str, str, dict]]:
    """(case letter, label, how to run it) for every case not skipped, in running order."""
    cases: list[tuple[str, str, dict]] = []
    if "b" not in skip:
        cases.append(("b", "Kafka source -> noop", {"sink": "noop"}))
    if "c" not in skip:
        cases.append(("c", "Kafka source -> Delta (write_batch)", {"sink": "delta"}))
    for engine in (e for e in args.engines.split(",") if e):
        for case, expect, text in (("e", False, "no expectation"), ("q", True, "not-null")):
            if case not in skip:
                label = f"ODS table, {engine}, {text}"
                cases.append((case, label, {"engine": engine, "expect": expect}))
    return cases


def report(
    label: str,
    dt: float,
    rows: int,
    busy: float | None,
    meter: CpuMeter,
    rates: dict[str, float | None],
) -> None:
    """A case's rate, its ratio to each baseline of its round ((a), (k)), and its CPU."""
    rate = rows / dt
    ratios = ", ".join(f"to ({k}): {rate / v:.2f}" for k, v in rates.items() if v)
    print(
        f"{label:<42} {rate:>10,.0f} rows/s  ({rows:,} rows, {dt:.1f}s incl. query start)  "
        f"ratio {ratios}\n    {cpu_line(meter.stop(), rows)}",
        flush=True,
    )
    if meter.jvm:
        per_m = 1_000_000 / rows
        print(
            "    jvm by thread: "
            + ", ".join(
                f"{g} {v * per_m:.1f}" for g, v in sorted(meter.jvm.items(), key=lambda kv: -kv[1])
            ),
            flush=True,
        )
    if busy:
        base = rates["a"] or 0
        print(
            f"    same, time in addBatch only (no query start): {rows / busy:,.0f} "
            f"rows/s, ratio to (a): {(rows / busy) / base:.2f}",
            flush=True,
        )


def run_case(
    spark, bootstrap: str, topic: str, work: Path, how: dict, args: argparse.Namespace
) -> tuple[float, int, float | None]:
    """One case over the whole topic: a bare stream into `how["sink"]`, or the framework's
    ODS table on `how["engine"]`."""
    work.mkdir(parents=True, exist_ok=True)
    if "sink" in how:
        return run_stream(spark, bootstrap, topic, work, how["sink"], args.split_offsets)
    return framework_ods(spark, bootstrap, topic, work, engine=how["engine"], expect=how["expect"])


def delta_rs_only(bootstrap: str, topic: str, partitions: int, work: Path) -> tuple[float, int]:
    """(d): read everything into one Arrow table first (not timed), then time delta-rs."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from pyspark.sql.pandas.types import to_arrow_schema

    from streams.kafka import SCHEMA, OffsetRange, consumer_config, end_offsets, read_range

    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    ends = end_offsets(bootstrap, topic)[topic]
    batches = []
    for p in range(partitions):
        rng = OffsetRange(topic, p, 0, ends[p])
        conf = consumer_config(bootstrap, {}, isolation_level="read_committed", size=rng.size)
        batches += list(read_range(rng, conf, schema))
    table = pa.Table.from_batches(batches, schema).drop_columns(["headers"])
    t0 = time.perf_counter()
    write_deltalake(str(work / "delta-rs"), table, mode="append")
    return time.perf_counter() - t0, table.num_rows


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=200, help="approximate value size in bytes")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--bootstrap", help="use this broker instead of starting the bundled one")
    ap.add_argument("--topic", help="reuse an existing, already filled topic")
    ap.add_argument("--split-offsets", type=int, default=200_000)
    ap.add_argument("--warmup", type=int, default=20_000, help="records of the warm-up topic")
    ap.add_argument("--skip", default="", help="comma list of cases to skip: b,c,d,e,q,k")
    ap.add_argument(
        "--engines",
        default="python,native",
        help="engines the framework's ODS table runs on, each in this run (comma list; "
        "`native/spark` is the native engines with `engines.parse: spark`)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="runs of (b), (c), (e) over the whole topic; the JVM's JIT is warm from round 2",
    )
    ap.add_argument(
        "--jvm-threads",
        action="store_true",
        help="also print the JVM's CPU by thread group (tasks, gc, jit, ...) per case",
    )
    ap.add_argument(
        "--sizes",
        help="SMALL,LARGE record counts: the marginal-rate mode (kafka_ingest_sizes.py)",
    )
    ap.add_argument(
        "--max-offsets",
        type=int,
        help="with --sizes: the tables' max_offsets_per_trigger (default: the source's)",
    )
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kafka-bench-"))
    broker = None
    try:
        bootstrap = args.bootstrap
        if not bootstrap:
            from streams.broker.launcher import BrokerProcess

            broker = BrokerProcess(work / "broker").start()
            bootstrap = broker.bootstrap
        if args.sizes:
            from kafka_ingest_sizes import run

            run(args, bootstrap, work)
            return
        topic = args.topic or f"bench-{uuid.uuid4().hex[:6]}"
        if not args.topic:
            t0 = time.perf_counter()
            produce_records(bootstrap, topic, args.records, args.size, args.partitions)
            print(
                f"produced {args.records:,} records of ~{args.size} B into {args.partitions} "
                f"partitions in {time.perf_counter() - t0:.1f}s",
                flush=True,
            )
        skip = set(args.skip.split(","))
        a_seconds = run_bare(bootstrap, topic, args, "bare confluent-kafka consumer")
        spark = spark_session()
        from streams.kafka import register_source

        register_source(spark)
        cases = bench_cases(args, skip)
        if args.warmup:
            # The first query of a session pays for JVM warm-up and Python worker start;
            # a long-running stream does not, so every case runs once on a small topic.
            warm = f"{topic}-warmup"
            produce_records(bootstrap, warm, args.warmup, args.size, args.partitions)
            for case, label, how in cases:
                dt, rows, _ = run_case(spark, bootstrap, warm, work / "warmup", how, args)
                print(f"    warm-up ({case}) {label}: {rows:,} rows in {dt:.1f}s", flush=True)
        # Round 1 is the first full-size run of each case in this JVM: its JIT is still
        # compiling the parse and write paths (measured: (e) used 16-19 s of JVM CPU per
        # 1M in round 1, 9-10 from round 2 on). A stream that runs for hours is in the
        # later state; both are printed.
        a_rates: list[float] = []
        for rnd in range(1, args.rounds + 1):
            print(f"-- round {rnd} of {args.rounds}", flush=True)
            if rnd > 1:
                # The bare consumer's rate drifts by up to a quarter between runs a few
                # minutes apart on this machine (measured: 292-388k rows/s), so each
                # round is compared with an (a) run just before it, in the same state
                # (the JVM alive and idle) as the cases it is compared with.
                a_seconds = run_bare(bootstrap, topic, args, "again")
            a_rates.append(args.records / a_seconds)
            k_seconds = None if "k" in skip else run_kcat(bootstrap, topic, args.records)
            for case, label, how in cases:
                meter = CpuMeter(threads=args.jvm_threads).start()
                dt, rows, busy = run_case(spark, bootstrap, topic, work / f"round{rnd}", how, args)
                rates = {
                    "a": a_rates[-1],
                    "k": None if k_seconds is None else args.records / k_seconds,
                }
                report(f"({case}) {label}", dt, rows, busy, meter, rates)
        spark.stop()
        print(
            "(a) by round: " + ", ".join(f"{r:,.0f}" for r in a_rates) + " rows/s; each "
            "case's ratio above is to its own round's (a)",
            flush=True,
        )
        if "d" not in skip:
            dt, rows = delta_rs_only(bootstrap, topic, args.partitions, work)
            print(
                f"(d) delta-rs write_deltalake alone: {rows / dt:>10,.0f} rows/s  ratio to (a): "
                f"{(rows / dt) / a_rates[0]:.2f} (to the first (a))",
                flush=True,
            )
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
