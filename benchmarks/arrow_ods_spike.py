"""Design measurement for issue #4, not the framework: what an ODS path that parses and
writes with Arrow inside Spark's tasks would reach, beside the framework's ODS table.
The framework has since taken that path for flat JSON landing tables
(`streams.delta.kafka_json`, which (e) now runs); this spike stays as the same work
without the streaming query, its guards and its fallback around it.

    .venv/bin/python benchmarks/arrow_ods_spike.py [--records 1000000] [--rounds 3]
        [--splits 1]

The framework parses in Spark (`from_json`) and writes with Spark's Parquet writer:
every record becomes a JVM row. Here, each Spark task (`mapInArrow` over the offset
ranges, `--splits` ranges per partition) reads its range with the framework's reader
(`streams.kafka._fetch`), parses the values with `pyarrow.json` against the benchmark's
schema, and writes Parquet with the sink's Arrow writer (`streams.delta._files`); the
driver commits the files in one Delta commit. No record passes through the JVM.

What it leaves out, and a real path would need: quarantine of records Arrow cannot
parse (a block that fails here fails the run), Spark's JSON semantics where they
differ from Arrow's (a number in a string field, single quotes, `NaN`), expectations,
the streaming query around it (offset log, the commit's app transaction), upsert.

Per round it runs (a) the bare consumer, (e) the framework's ODS table
(`kafka_ingest_bench.framework_ods`) and (f) this path on the same topic, in that order,
and prints each one's ratio to the round's (a). It checks that (f)'s table has every
record once and the same `order_id` sum as (e)'s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kafka_ingest_bench as kb  # sets the PySpark interpreter first
import pyarrow as pa

VALUES = pa.schema(
    [
        ("order_id", pa.int64()),
        ("user_id", pa.int64()),
        ("amount", pa.float64()),
        ("city", pa.string()),
        ("note", pa.string()),
    ]
)
TABLE = pa.schema(
    [
        *VALUES,
        ("_topic", pa.string()),
        ("_partition", pa.int32()),
        ("_offset", pa.int64()),
        ("_timestamp", pa.timestamp("us", tz="UTC")),
    ]
)
FILES = "path string, size long, partition_values string, stats string, modification_time long"


def _lines(values: pa.Array) -> pa.Buffer:
    """The values of one batch as newline-delimited text, in one buffer (no per-record
    Python). A value holding a newline would shift the rows; the spike's data has none."""
    import numpy as np
    import pyarrow.compute as pc

    text = pc.binary_join_element_wise(values.cast(pa.string()), pa.scalar(""), "\n")
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32)[
        text.offset : text.offset + len(text) + 1
    ]
    return text.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def task(bootstrap: str, root: str):
    """The `mapInArrow` function: read, parse and write each range of the task."""

    def run(batches):
        import pyarrow.json as pj
        from pyspark.sql.pandas.types import to_arrow_schema

        from streams.delta._files import file_writer
        from streams.kafka._fetch import consumer_config, read_range
        from streams.kafka.offsets import OffsetRange
        from streams.kafka.source import SCHEMA

        source = to_arrow_schema(SCHEMA, timezone="UTC")
        parse = pj.ParseOptions(explicit_schema=VALUES, unexpected_field_behavior="ignore")
        read = pj.ReadOptions(use_threads=False, block_size=1 << 26)

        def parsed():
            for b in batches:
                for r in b.to_pylist():
                    rng = OffsetRange(r["topic"], r["partition"], r["start"], r["end"])
                    conf = consumer_config(
                        bootstrap, {}, isolation_level="read_committed", size=rng.size
                    )
                    for rb in read_range(rng, conf, source, batch_records=50_000):
                        t = pj.read_json(
                            pa.BufferReader(_lines(rb.column("value"))),
                            read_options=read,
                            parse_options=parse,
                        )
                        if t.num_rows != rb.num_rows:
                            raise RuntimeError(f"{t.num_rows} rows parsed of {rb.num_rows}")
                        cols = [t.column(f.name).combine_chunks() for f in VALUES]
                        cols += [rb.column(c) for c in ("topic", "partition", "offset")]
                        cols.append(rb.column("timestamp"))
                        yield pa.RecordBatch.from_arrays(cols, schema=TABLE)

        yield from file_writer(root, TABLE, [], ("_offset",))(parsed())

    return run


def arrow_ods(spark, bootstrap: str, topic: str, partitions: int, root: str, splits: int):
    """(f): (seconds, rows) of one run over the whole topic, commit included."""
    from deltalake.transaction import AddAction

    from streams.delta.sink import _create
    from streams.kafka.admin import end_offsets

    t0 = time.perf_counter()
    ends = end_offsets(bootstrap, topic)[topic]
    ranges = []
    for p in range(partitions):
        step = max(1, -(-ends[p] // splits))
        ranges += [(topic, p, s, min(ends[p], s + step)) for s in range(0, ends[p], step)]
    df = spark.createDataFrame(ranges, "topic string, partition int, start long, end long")
    files = df.repartition(len(ranges)).mapInArrow(task(bootstrap, root), FILES).collect()
    adds = [
        AddAction(
            r["path"],
            r["size"],
            json.loads(r["partition_values"]),
            r["modification_time"],
            True,
            r["stats"],
        )
        for r in files
    ]
    _create(root, TABLE, adds, [])
    return time.perf_counter() - t0, sum(json.loads(r["stats"])["numRecords"] for r in files)


def check(f_root: str, e_table: Path, records: int) -> str:
    import pyarrow.compute as pc

    from streams.delta.arrow import read_table

    f = read_table(f_root, columns=["_partition", "_offset", "order_id"])
    e = read_table(e_table, columns=["order_id"])
    keys = pc.add(pc.multiply(f["_partition"].cast(pa.int64()), 1 << 40), f["_offset"])
    if f.num_rows != records or len(pc.unique(keys)) != records:
        raise SystemExit(f"(f) wrote {f.num_rows} rows, {len(pc.unique(keys))} distinct")
    if pc.sum(f["order_id"]).as_py() != pc.sum(e["order_id"]).as_py():
        raise SystemExit("(f) and (e) differ in the sum of order_id")
    return "checked: every record once, order_id sum equal to (e)'s"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--splits", type=int, default=1, help="ranges (tasks) per partition")
    args = ap.parse_args()

    from streams.broker.launcher import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="arrow-ods-spike-"))
    broker = BrokerProcess(work / "broker").start()
    try:
        bootstrap, topic = broker.bootstrap, "spike"
        kb.produce_records(bootstrap, topic, args.records, args.size, args.partitions)
        kb.produce_records(bootstrap, "warm", 20_000, args.size, args.partitions)
        spark = kb.spark_session()
        spark.sparkContext.setLogLevel("ERROR")
        from streams.kafka import register_source

        register_source(spark)
        arrow_ods(spark, bootstrap, "warm", args.partitions, str(work / "warm-f"), args.splits)
        kb.framework_ods(spark, bootstrap, "warm", work)
        for rnd in range(1, args.rounds + 1):
            print(f"-- round {rnd}", flush=True)
            base = args.records / kb.run_bare(bootstrap, topic, args, "bare consumer")
            (work / f"e{rnd}").mkdir()
            meter = kb.CpuMeter().start()
            dt, rows, _ = kb.framework_ods(spark, bootstrap, topic, work / f"e{rnd}")
            print(
                f"(e) framework ODS table  {rows / dt:>10,.0f} rows/s ({dt:.1f}s) ratio "
                f"{rows / dt / base:.2f}\n    {kb.cpu_line(meter.stop(), rows)}",
                flush=True,
            )
            root = str(work / f"f{rnd}")
            meter = kb.CpuMeter().start()
            dt, rows = arrow_ods(spark, bootstrap, topic, args.partitions, root, args.splits)
            print(
                f"(f) Arrow in Spark tasks {rows / dt:>10,.0f} rows/s ({dt:.1f}s) ratio "
                f"{rows / dt / base:.2f}, {args.splits} task(s) per partition\n"
                f"    {kb.cpu_line(meter.stop(), rows)}",
                flush=True,
            )
            e_table = work / f"e{rnd}" / f"wh-{topic}" / "tables" / "ods_bench"
            print("    " + check(root, e_table, args.records), flush=True)
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
