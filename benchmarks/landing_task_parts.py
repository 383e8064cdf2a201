"""Where a landing task's CPU per record goes: the steps of `streams.landing.tasks`'s
`run_task`, block by block, in one process, over a real topic of the bundled broker.

    flock /tmp/warehouse-bench.lock .venv/bin/python benchmarks/landing_task_parts.py \\
        [--records 1000000] [--partitions 4] [--rounds 2] [--pools default,system]

Produces `--records` records of the `--sizes` benchmark's shape
(`kafka_ingest_sizes.produce`: ~180 B, one in a thousand cut off, one in a thousand with
a null `order_id`), then, after a warm-up of 20,000 records, per round and per Arrow
memory pool of `--pools` (`default` is pyarrow's, mimalloc on Linux; the pools take
turns, in the other order every other round) runs what one task per Kafka partition
runs, a block of 10,000 records at a time: the column reader's fetch (`read_ranges`),
`split_block` with the known bad records explained, the not-null rule of the `--sizes`
benchmark's (q) table (`ArrowChecks`, the held rows filtered out as a task stages
them), and `file_writer`'s Parquet files. The quarantine files of the known bad records
(0.1 %) are not written.

Each round also times kcat (`kcat -C -e`, as `ingest_runs.run_kcat` runs it) reading
the same topic: its CPU (user + system) is what librdkafka costs a C consumer that only
prints the values. Printed per round and pool, per 1M records: the main thread's CPU in
each step (`time.thread_time`), the other threads' (librdkafka's fetch and broker
threads, Arrow's), the process's whole, and the wall time. The broker runs in a process
of its own and is not counted. Not a test: nothing is asserted but the row count.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from kafka_ingest_bench import ods_payload
from kafka_ingest_sizes import produce

STEPS = ("fetch", "type", "judge", "write")


def pool(name: str) -> pa.MemoryPool:
    return {
        "default": pa.default_memory_pool,
        "mimalloc": pa.mimalloc_memory_pool,
        "jemalloc": pa.jemalloc_memory_pool,
        "system": pa.system_memory_pool,
    }[name]()


def run_tasks(bootstrap: str, topic: str, records: int, partitions: int, root: Path) -> dict:
    """Every partition's task, one after another; CPU seconds by step and in all."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from streams.delta import file_writer
    from streams.kafka import SCHEMA_WITHOUT_HEADERS
    from streams.kafka.fetch import consumer_config, read_ranges
    from streams.kafka.offsets import OffsetRange
    from streams.landing.arrow_json import split_block
    from warehouse.quality.arrow_rows import ArrowChecks, ArrowRule

    source = to_arrow_schema(SCHEMA_WITHOUT_HEADERS, timezone="UTC")
    payload = ods_payload()
    rules = ArrowChecks((ArrowRule("not_null_order_id", "quarantine", "not_null", ("order_id",)),))
    spent = dict.fromkeys(STEPS, 0.0)
    written = 0
    clock = time.thread_time

    def typed(blocks):
        nonlocal written
        while True:
            t0 = clock()
            batch = next(blocks, None)
            t1 = clock()
            spent["fetch"] += t1 - t0
            if batch is None:
                return
            rows = split_block(batch, payload, (), explain=True).rows
            t2 = clock()
            spent["type"] += t2 - t1
            verdict = rules.judge(rows)
            rows.filter(verdict.hold)  # what a task stages
            rows = rows.filter(verdict.keep)
            spent["judge"] += clock() - t2
            written += rows.num_rows
            yield rows

    main, process, wall = clock(), time.process_time(), time.perf_counter()
    for p in range(partitions):
        end = len(range(p, records, partitions))
        conf = consumer_config(bootstrap, {}, isolation_level="read_uncommitted", size=end)
        rows = typed(read_ranges([OffsetRange(topic, p, 0, end)], conf, source))
        first = next(rows)  # the writer's schema
        write = file_writer(str(root / f"p{p}"), first.schema, [], ())
        for _files in write(itertools.chain([first], rows)):
            pass
    main, process = clock() - main, time.process_time() - process
    # The writer's share: the main thread's whole less the other steps'.
    spent["write"] = main - spent["fetch"] - spent["type"] - spent["judge"]
    return {
        **spent,
        "other threads": process - main,
        "process": process,
        "wall": time.perf_counter() - wall,
        "written": written,
    }


def kcat_cpu(bootstrap: str, topic: str) -> float | None:
    """CPU seconds (user + system) of one `kcat -C -e` read of the whole topic; None
    without kcat."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        return None
    cmd = [kcat, "-C", "-e", "-q", "-o", "beginning", "-b", bootstrap, "-t", topic]
    cmd += ["-X", "fetch.max.bytes=67108864", "-f", "%s\\n"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.devnull, "wb") as sink:
        subprocess.run(cmd, stdout=sink, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--pools", default="default,system")
    args = ap.parse_args()
    from streams.broker.launcher import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="landing-parts-"))
    broker = BrokerProcess(work / "broker").start()
    try:
        topic = "landing-parts"
        produce(broker.bootstrap, topic, args.records, 180, args.partitions)
        pools = args.pools.split(",")
        expected = args.records - args.records // 1000 * 2  # cut off, null id
        per = 1e6 / args.records
        # The first read and write of a process pay its imports and librdkafka's start.
        run_tasks(broker.bootstrap, topic, 20_000, args.partitions, work / "warm-up")
        for rnd in range(args.rounds):
            kcat = kcat_cpu(broker.bootstrap, topic)
            if kcat is not None:
                print(f"round {rnd + 1}, kcat -C -e CPU s per 1M: {kcat * per:.3f}", flush=True)
            for name in pools if rnd % 2 == 0 else pools[::-1]:
                pa.set_memory_pool(pool(name))
                root = work / f"r{rnd}-{name}"
                got = run_tasks(broker.bootstrap, topic, args.records, args.partitions, root)
                shutil.rmtree(root)
                if abs(got["written"] - expected) > 2:
                    raise SystemExit(f"wrote {got['written']:,} rows, expected ~{expected:,}")
                parts = " ".join(f"{k} {got[k] * per:.3f}" for k in (*STEPS, "other threads"))
                print(
                    f"round {rnd + 1}, pool {name:8s} CPU s per 1M: {parts} | "
                    f"process {got['process'] * per:.3f}, wall {got['wall'] * per:.3f}",
                    flush=True,
                )
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
