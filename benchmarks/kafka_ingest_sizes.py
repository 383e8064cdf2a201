"""`kafka_ingest_bench.py --sizes SMALL,LARGE`: the ingest at two sizes, its marginal rate
against kcat, every row checked, and the peak memory of each process.

    flock /tmp/warehouse-bench.lock .venv/bin/python benchmarks/kafka_ingest_bench.py \\
        --sizes 100000,3100000 [--engines python,native,native/spark] [--size 200] \\
        [--max-offsets N]

For each size, a topic of that many JSON records (4 partitions, ~183 B) where one record
in a thousand does not parse (a cut-off object) and one in a thousand has a null
`order_id`. On each topic, in one run: (k) kcat (`kcat -C -e -o beginning`, the fastest
of `KCAT_RUNS` reads); then, on each
engine, (e) an ODS table without an expectation and (q) the same table with
`expect_column_values_to_not_be_null: {column: order_id}, on_violation: quarantine`, each
a fresh project run once by the runner (`project.pipeline(...).run(once=True)`) (`native/spark`:
the native engines with `engines.parse: spark`, Spark's `from_json` instead of the Arrow
path), with
`max_offsets_per_trigger: N` when `--max-offsets` is given (else the source's default).
The schema does not require `order_id`, so (e) keeps the null ones and (q) quarantines
them.

After each run (not timed), the table and its quarantine are read back and checked: the
table holds exactly the expected `order_id`s (and, for (e), the expected number of nulls),
the quarantine exactly the expected records (by Kafka partition and offset), with the
parse-error reason for the cut-off ones and the expectation's reason for the null ones.
A mismatch stops the run.

Before the sizes, each case runs on a `--warmup`-record topic in `WARMUP_BATCHES`
batches, so that what is measured is the steady state, not the JIT's warm-up.

Printed per case and size: rows/s over the whole run (query start included) and over
addBatch time, the batches the backlog took, the CPU used per 1M records by kind of
process (as the other mode), and the peak resident memory (VmHWM from
/proc, reset before each case) of this driver process, the JVM (in local mode the driver
and the executors share it) and Spark's Python workers (the largest one, and their sum).
Then per case the marginal rate between the smallest and the largest size,
(large - small) / (t_large - t_small), which cancels the query's start, and its ratio to
kcat's marginal rate in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

KCAT_RUNS = 3
"""kcat reads each topic this many times; its fastest run is the baseline: one run's
rate moved 1.2M-3.8M rows/s on this machine between runs of the same commands."""

WARMUP_BATCHES = 10
"""Batches of each case's warm-up run (`--warmup` records): a query's per-batch JVM code
(planning, Spark's closure cleaning, the commits) is compiled by the JIT over its first
few dozen batches; with one warm-up batch per case, the JIT's threads took 1.0-1.1 s of
CPU during the measured 3.1M-record run."""

BAD_EVERY, BAD_AT, NULL_AT = 1000, 500, 250
"""Record `i` is cut off when `i % 1000 == 500`, has a null `order_id` when `== 250`."""

SCHEMA = {
    "type": "object",
    "properties": {
        "order_id": {"type": "integer"},
        "user_id": {"type": "integer"},
        "amount": {"type": "number"},
        "city": {"type": "string"},
        "note": {"type": "string"},
    },
}
NOT_NULL = (
    "expectations:\n"
    "  - expect_column_values_to_not_be_null: {column: order_id}\n"
    "    on_violation: quarantine\n"
)


def produce(
    bootstrap: str, topic: str, records: int, size: int, partitions: int, *, clean: bool = False
) -> None:
    """`records` records, record `i` to partition `i % partitions` (so its offset there is
    `i // partitions`), key `i`; with `clean`, none cut off and none with a null id."""
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
            "max.in.flight.requests.per.connection": 1,  # offsets follow `i`
        }
    )
    failed: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failed.append(err.str())

    for i in range(records):
        at = -1 if clean else i % BAD_EVERY
        oid = "null" if at == NULL_AT else str(i)
        value = (
            f'{{"order_id":{oid},"user_id":{i % 9973},"amount":{(i % 10000) / 100},'
            f'"city":"Oslo","note":"{pad}"}}'
        )
        if at == BAD_AT:
            value = value[: len(value) // 2]
        while True:
            try:
                producer.produce(
                    topic,
                    value=value.encode(),
                    key=str(i).encode(),
                    partition=i % partitions,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(600)
    if failed:
        raise SystemExit(f"producing to `{topic}` failed: {failed[0]}")


def _ids(records: int, at: tuple[int, ...] | None = None, skip: tuple[int, ...] = ()) -> np.ndarray:
    i = np.arange(records, dtype=np.int64)
    mod = i % BAD_EVERY
    keep = np.ones(records, dtype=bool)
    if at is not None:
        keep = np.isin(mod, at)
    for s in skip:
        keep &= mod != s
    return i[keep]


def verify(project, records: int, partitions: int, *, expect: bool) -> str:
    """Checks the table and its quarantine hold exactly the expected records; a one-line
    summary, or SystemExit naming the first difference."""
    import pyarrow.compute as pc

    from streams.delta.arrow import read_table

    table = read_table(str(project.table_path("ods_bench")), columns=["order_id"])
    ids = table.column("order_id")
    want = _ids(records, skip=(BAD_AT, NULL_AT))
    want_nulls = 0 if expect else len(_ids(records, at=(NULL_AT,)))
    got = np.sort(pc.drop_null(ids).to_numpy())
    if ids.null_count != want_nulls or not np.array_equal(got, want):
        raise SystemExit(
            f"table: {len(got):,} ids and {ids.null_count:,} nulls, expected {len(want):,} "
            f"ids and {want_nulls:,} nulls (equal ids: {np.array_equal(got, want)})"
        )
    q = read_table(
        str(project.quarantine_path("ods_bench")),
        columns=["source_partition", "source_offset", "reason"],
    )
    where = pc.add(
        pc.multiply(q.column("source_offset"), partitions),
        q.column("source_partition").cast("int64"),
    ).to_numpy()
    held = (BAD_AT, NULL_AT) if expect else (BAD_AT,)
    want_q = _ids(records, at=held)
    if not np.array_equal(np.sort(where), want_q):
        raise SystemExit(f"quarantine: {len(where):,} records, expected {len(want_q):,}")
    reasons = q.column("reason").to_pylist()
    kinds: dict[str, int] = {}
    for i, reason in zip(where.tolist(), reasons, strict=True):
        want_reason = "parse error: " if i % BAD_EVERY == BAD_AT else "failed expectations: "
        if not reason.startswith(want_reason):
            raise SystemExit(f"quarantine: record {i} has reason `{reason}`")
        kinds[want_reason] = kinds.get(want_reason, 0) + 1
    parts = ", ".join(f"{n:,} `{k.strip()}`" for k, n in sorted(kinds.items()))
    return f"ok: {len(got):,} ids, {ids.null_count:,} null; quarantine {parts}"


# -- memory -----------------------------------------------------------------------


def _tree(root: int) -> dict[int, str]:
    from proc_cpu import processes as cpu_by_process

    return {pid: kind for pid, (kind, _) in cpu_by_process(root).items()}


def reset_peaks(root: int) -> None:
    """Resets VmHWM of `root` and every process under it (`clear_refs` 5)."""
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass  # exited meanwhile, or a kernel without it: the peak is then lifelong


def peaks(root: int) -> dict[str, float]:
    """Peak resident MB by kind: `driver`, `jvm`, `worker max` (largest Python worker) and
    `workers` (their sum)."""
    out: dict[str, float] = {}
    for pid, kind in _tree(root).items():
        if kind == "broker":
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                hwm = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 1024
        except (OSError, StopIteration):
            continue
        if kind == "python workers":
            out["worker max"] = max(out.get("worker max", 0.0), hwm)
            out["workers"] = out.get("workers", 0.0) + hwm
        else:
            out[kind] = out.get(kind, 0.0) + hwm
    return out


# -- the run ----------------------------------------------------------------------


def ods_project(
    root: Path,
    bootstrap: str,
    topic: str,
    engine: str,
    *,
    expect: bool,
    cap: int | None = None,
    java: str = "",
) -> Path:
    """A fresh project at `root` of one ODS table, `ods_bench`, on `topic`, its tables
    under it; `engine`: an `--engines` entry (`ingest_runs.engines_line`); `expect`: with
    the quarantining not-null expectation; `cap`: its `max_offsets_per_trigger` (None: the
    source's default); `java`: the driver's Java options in its `spark.conf`."""
    from ingest_runs import engines_line

    (root / "conf").mkdir(parents=True)
    (root / "schemas").mkdir()
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "conf" / "local.yml").write_text(
        f'warehouse_root: {root / "wh"}\nkafka:\n  bootstrap: "{bootstrap}"\n'
        + engines_line(engine)
        + (
            f"spark:\n  conf: {{spark.driver.extraJavaOptions: {json.dumps(java)}}}\n"
            if java
            else ""
        )
    )
    (root / "schemas" / "bench.json").write_text(json.dumps(SCHEMA))
    (root / "layers" / "ods" / "bench.yml").write_text(
        f"table: ods_bench\nsource:\n  kafka: {{topic: {topic}, format: json, schema: bench"
        + (f", max_offsets_per_trigger: {cap}" if cap else "")
        + "}\n"
        "sink: {mode: append}\n" + (NOT_NULL if expect else "")
    )
    return root


def ods_run(
    spark, bootstrap: str, topic: str, work: Path, engine: str, expect: bool, cap: int | None
):
    """(seconds, records read, addBatch seconds, batches, project) of one fresh ODS table;
    `engine`: an `--engines` entry (`ingest_runs.engines_line`); `cap`: its
    `max_offsets_per_trigger` (None: the source's default)."""
    from ingest_runs import batch_times

    from warehouse import Project

    root = work / f"project-{topic}-{engine.replace('/', '-')}{'-q' if expect else ''}"
    project = Project.load(ods_project(root, bootstrap, topic, engine, expect=expect, cap=cap))
    with batch_times(spark) as times:
        t0 = time.perf_counter()
        (result,) = project.pipeline(spark, "ods").run(once=True)
        dt = time.perf_counter() - t0
        busy = times.wait(result.batches)
    return dt, result.rows_read, busy, result.batches, project


def _mb(p: dict[str, float]) -> str:
    order = ("driver", "jvm", "worker max", "workers")
    return ", ".join(f"{k} {p[k]:,.0f}" for k in order if k in p) + " MB"


def run(args: argparse.Namespace, bootstrap: str, work: Path) -> None:
    from ingest_runs import CpuMeter, cpu_line, run_kcat, spark_session

    from streams.kafka import register_source

    sizes = [int(s) for s in args.sizes.split(",")]
    topics = {}
    for n in sizes:
        topics[n] = f"sizes-{n}-{os.getpid()}"
        t0 = time.perf_counter()
        produce(bootstrap, topics[n], n, args.size, args.partitions)
        print(f"produced {n:,} records into {topics[n]} in {time.perf_counter() - t0:.1f}s")
    spark = spark_session()
    register_source(spark)
    print(f"spark.driver.memory {spark.conf.get('spark.driver.memory', '1g')} (the JVM's heap)")
    cases = [("k", "kcat -C -e", None, False)]
    for engine in (e for e in args.engines.split(",") if e):
        cases.append(("e", f"{engine}, no expectation", engine, False))
        cases.append(("q", f"{engine}, not-null quarantine", engine, True))
    if args.warmup:
        warm = f"sizes-warmup-{os.getpid()}"
        produce(bootstrap, warm, args.warmup, args.size, args.partitions)
        for _, label, engine, expect in cases[1:]:
            cap = max(1, args.warmup // WARMUP_BATCHES)
            ods_run(spark, bootstrap, warm, work / "warmup", engine, expect, cap)
            print(f"    warm-up: {label}", flush=True)
    seconds: dict[str, dict[int, float]] = {}
    me = os.getpid()
    for n in sizes:
        print(f"-- {n:,} records", flush=True)
        for case, label, engine, expect in cases:
            name = f"({case}) {label}"
            if engine is None:
                dt = run_kcat(bootstrap, topics[n], n, runs=KCAT_RUNS)
                if dt is None:
                    continue
                seconds.setdefault(name, {})[n] = dt
                continue
            reset_peaks(me)
            meter = CpuMeter().start()
            dt, rows, busy, batches, project = ods_run(
                spark, bootstrap, topics[n], work / f"n{n}", engine, expect, args.max_offsets
            )
            mem = peaks(me)
            cpu = cpu_line(meter.stop(), rows)
            seconds.setdefault(name, {})[n] = dt
            ok = verify(project, n, args.partitions, expect=expect)
            busy_rate = f"{rows / busy:,.0f}" if busy else "?"
            print(
                f"{name:<38} {rows / dt:>10,.0f} rows/s ({dt:.1f}s), addBatch only "
                f"{busy_rate} rows/s, {batches} batch(es)\n    {cpu}\n"
                f"    peak memory: {_mb(mem)}\n    {ok}",
                flush=True,
            )
            shutil.rmtree(project.root, ignore_errors=True)
    spark.stop()
    if len(sizes) < 2:
        return
    small, large = sizes[0], sizes[-1]
    print(f"-- marginal rate between {small:,} and {large:,} records")
    k = seconds.get("(k) kcat -C -e")
    k_rate = (large - small) / (k[large] - k[small]) if k else None
    for name, by in seconds.items():
        rate = (large - small) / (by[large] - by[small])
        ratio = f", to (k): {rate / k_rate:.2f}" if k_rate else ""
        whole = f"whole-run {small / by[small]:,.0f} -> {large / by[large]:,.0f} rows/s"
        print(f"{name:<38} {rate:>10,.0f} rows/s{ratio}  ({whole})", flush=True)
