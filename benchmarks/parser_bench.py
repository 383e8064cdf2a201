"""Our two C extensions against the libraries that do the same work (issue 65).

    flock /tmp/warehouse-bench.lock .venv/bin/python benchmarks/parser_bench.py \\
        [--records 200000] [--topic-records 500000] [--rounds 5] [--skip parse,read,both]

Optional libraries (orjson, polars, pysimdjson) are measured where they import; the
project does not depend on them, so for this benchmark only they can be installed
apart: `pip install --target /tmp/parse-libs orjson polars pysimdjson` and
`PYTHONPATH=/tmp/parse-libs:.`.

Three parts, each in interleaved rounds (every case once per round, in turn), best and
median of `--rounds`, the ratio of each case to the first one measured in the same run:

(parse) one batch of `--records` Kafka values of the ingest benchmark's shape (~183 B of
    JSON, `kafka_ingest_bench.ods_value`) typed into the Arrow table of its payload schema:
    the flat parser (`_flatjson`, C, through `arrow_json`'s parser as `split_block` calls
    it) against Arrow's JSON reader on the newline-joined values with the explicit schema,
    polars' `read_ndjson` with the schema, and orjson's or simdjson's `loads` per value
    then `pa.Table.from_pylist`. Before timing, every case's table is checked equal to the
    flat parser's. Then the framework's whole step, `split_block(explain=True)`, with and
    without the flat parser (`flat=False`: Arrow's reader, screening and bisection) on
    the same batch and on a dirty one (one value in a thousand cut off, one in a thousand
    with a null `order_id`, as `kafka_ingest_sizes.py` produces): those two must type the
    same rows and leave the same records untyped. Of the libraries, only the per-value
    `loads` can say which record is bad; the block readers refuse the whole dirty batch,
    which the output says.
(read) `--topic-records` such records in 4 partitions of the bundled broker, read whole
    with `read_ranges` into the source's Arrow record batches: the column reader
    (`_rdfetch`, C, `reader="native"`) against confluent-kafka's
    `Consumer.consume(num_messages=...)` (`reader="python"`); the two must give the same
    records.
(both) the read and the parse together, range by range as a task does (`split_block`
    on each block read): the four pairs of reader and parser. This is the Python worker's
    share of the ingest; Spark's and the Delta write's are the same in all four.

Printed per case: wall seconds and this process's CPU seconds (librdkafka's threads
included) per 1M records, and the ratio of each to the baseline's. The machine is
shared: CPU per record moves less with its load than wall time. Not a test: nothing is
asserted.
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

# Run as a script, this directory is on the path.
from kafka_ingest_bench import ods_payload, ods_value, produce_records

from streams.landing import arrow_json
from streams.landing.arrow_json import split_block

PAD = "x" * 110
"""`produce_records`' note for `--size 200`: values of ~183 B."""
CUT_AT, NULL_AT = 500, 250
"""As `kafka_ingest_sizes.py`: record `i` is cut off when `i % 1000 == 500`, has a null
`order_id` when `== 250`."""


def values(n: int, *, dirty: bool) -> list[bytes]:
    out = []
    for i in range(n):
        v = ods_value(i, PAD)
        if dirty and i % 1000 == NULL_AT:
            v = v.replace(b'"order_id":%d' % i, b'"order_id":null', 1)
        if dirty and i % 1000 == CUT_AT:
            v = v[: len(v) // 2]
        out.append(v)
    return out


def record_batch(vals: list[bytes]) -> pa.RecordBatch:
    n = len(vals)
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([str(i).encode() for i in range(n)], pa.binary()),
            "value": pa.array(vals, pa.binary()),
            "topic": pa.repeat(pa.scalar("bench"), n),
            "partition": pa.repeat(pa.scalar(0, pa.int32()), n),
            "offset": pa.array(np.arange(n, dtype=np.int64)),
            "timestamp": pa.repeat(pa.scalar(0, pa.timestamp("us", tz="UTC")), n),
        }
    )


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


def rounds(
    title: str, cases: dict[str, Callable[[], object]], n: int, args: argparse.Namespace
) -> None:
    """Run `cases` in turn `args.rounds` times; print best and median per 1M records and
    the ratios to the first case (case / baseline: above 1 the case is slower)."""
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            wall, cpu, _ = timed(fn)
            got[name].append((wall, cpu))
    per_m = 1_000_000 / n
    base = next(iter(cases))
    b_wall = min(w for w, _ in got[base])
    b_cpu = min(c for _, c in got[base])
    print(f"\n{title}: {n:,} records, best / median of {args.rounds}, per 1M records")
    print(f"  {'case':<52} {'wall s':>13} {'cpu s':>13} {'x wall':>7} {'x cpu':>7}")
    for name, runs in got.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(
            f"  {name:<52} {min(walls) * per_m:>6.2f}/{statistics.median(walls) * per_m:<6.2f}"
            f" {min(cpus) * per_m:>6.2f}/{statistics.median(cpus) * per_m:<6.2f}"
            f" {min(walls) / b_wall:>7.2f} {min(cpus) / b_cpu:>7.2f}",
            flush=True,
        )


# ---- (parse) -------------------------------------------------------------------------


def parse_cases(batch: pa.RecordBatch, schema: pa.Schema) -> dict[str, Callable[[], pa.Table]]:
    """The cases that type a clean batch into `schema`, each returning the table."""
    values = batch.column("value")
    parser = arrow_json._parser(schema, (), True)

    def flat() -> pa.Table:
        out = parser.parse_flat(values)
        assert out is not None, "the flat parser is not built"
        return out[3]

    # Joined as `split_block` joins them, in Arrow without Python per value.
    def arrow() -> pa.Table:
        buf = arrow_json._lines(values)
        read = pj.ReadOptions(use_threads=False, block_size=buf.size + 1)
        opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        return pj.read_json(pa.BufferReader(buf), read_options=read, parse_options=opts)

    cases: dict[str, Callable[[], pa.Table]] = {
        "_flatjson (C)": flat,
        "pyarrow.json.read_json, one thread": arrow,
    }
    try:
        import polars as pl

        types = {pa.int64(): pl.Int64, pa.float64(): pl.Float64, pa.string(): pl.String}
        pl_schema = {f.name: types[f.type] for f in schema}

        def polars() -> pa.Table:
            buf = io.BytesIO(memoryview(arrow_json._lines(values)))
            return pl.read_ndjson(buf, schema=pl_schema).to_arrow().cast(schema)

        cases[f"polars {pl.__version__} read_ndjson"] = polars
    except ImportError:
        print("polars: not installed")
    try:
        import orjson

        def orjson_rows() -> pa.Table:
            return pa.Table.from_pylist(list(map(orjson.loads, values.to_pylist())), schema)

        cases[f"orjson {orjson.__version__} loads + from_pylist"] = orjson_rows
    except ImportError:
        print("orjson: not installed")
    try:
        import simdjson

        def simd_rows() -> pa.Table:
            p = simdjson.Parser()
            return pa.Table.from_pylist(
                [p.parse(v, recursive=True) for v in values.to_pylist()], schema
            )

        cases[f"pysimdjson {version('pysimdjson')} parse + from_pylist"] = simd_rows
    except ImportError:
        print("pysimdjson: not installed")
    return cases


def per_record(batch: pa.RecordBatch, schema: pa.Schema) -> tuple[pa.Table, list[int]] | None:
    """The dirty batch through orjson value by value: the typed rows and the offsets of
    the values it refused; what a library path would build rejects from."""
    try:
        import orjson
    except ImportError:
        return None
    rows, bad = [], []
    for i, v in enumerate(batch.column("value").to_pylist()):
        try:
            rows.append(orjson.loads(v))
        except orjson.JSONDecodeError:
            bad.append(i)
    return pa.Table.from_pylist(rows, schema), bad


def untyped(out: arrow_json.ArrowParse) -> list[int]:
    """The offsets of the records `split_block` did not type (known bad or fallback)."""
    bad = [] if out.bad is None else out.bad.column("offset").to_pylist()
    return sorted(bad + out.fallback.column("offset").to_pylist())


def run_parse(args: argparse.Namespace) -> None:
    schema = ods_payload()
    clean = record_batch(values(args.records, dirty=False))
    dirty = record_batch(values(args.records, dirty=True))
    cases = parse_cases(clean, schema)
    want = cases["_flatjson (C)"]()
    for name, fn in cases.items():
        got = fn()
        if not got.equals(want):
            raise SystemExit(f"{name}: its table differs from the flat parser's")
    print(f"parse: the {len(cases)} cases give equal tables on the clean batch")
    on_dirty = parse_cases(dirty, schema)
    for name in list(cases)[1:3]:  # the block readers: Arrow's and polars'
        try:
            on_dirty[name]()
            print(f"  {name} on the dirty batch: no error")
        except Exception as e:  # noqa: BLE001 - the benchmark reports what it raised
            print(f"  {name} on the dirty batch refuses it: {type(e).__name__}: {str(e)[:90]}")
    lib = per_record(dirty, schema)
    rounds("(parse) clean batch, values to the payload table", cases, args.records, args)

    splits = {
        "split_block, _flatjson (C) first": lambda b: split_block(b, schema, [], explain=True),
        "split_block(flat=False): Arrow's reader": lambda b: split_block(
            b, schema, [], flat=False, explain=True
        ),
    }
    for batch, label in ((clean, "clean"), (dirty, "dirty")):
        first, second = (fn(batch) for fn in splits.values())
        if not first.rows.equals(second.rows) or untyped(first) != untyped(second):
            raise SystemExit(f"split_block: flat and Arrow differ on the {label} batch")
        if lib is not None and label == "dirty":
            typed, bad = lib
            if bad != untyped(first) or not typed.equals(
                pa.Table.from_batches([first.rows]).select(schema.names)
            ):
                raise SystemExit("orjson per record: rows or rejects differ from split_block's")
            print("  orjson value by value on the dirty batch: same rows and rejects")
        cases = {name: (lambda fn=fn, b=batch: fn(b)) for name, fn in splits.items()}
        if lib is not None:
            cases["orjson per value + from_pylist, rejects by index"] = lambda b=batch: per_record(
                b, schema
            )
        rounds(f"(parse) split_block, {label} batch", cases, args.records, args)


# ---- (read) and (both) ---------------------------------------------------------------


def run_kafka(args: argparse.Namespace, skip: set[str]) -> None:
    from streams.broker.launcher import BrokerProcess
    from streams.kafka import OffsetRange, consumer_config, end_offsets
    from streams.kafka.fetch import RECORD_SCHEMA, read_ranges

    payload = ods_payload()
    work = Path(tempfile.mkdtemp(prefix="parser-bench-"))
    broker = BrokerProcess(work / "broker").start()
    try:
        produce_records(broker.bootstrap, "parse", args.topic_records, 200, 4)
        ends = end_offsets(broker.bootstrap, "parse")["parse"]
        ranges = [OffsetRange("parse", p, 0, end) for p, end in sorted(ends.items())]
        conf = consumer_config(
            broker.bootstrap, {}, isolation_level="read_committed", size=args.topic_records
        )

        def read(reader: str) -> pa.Table:
            return pa.Table.from_batches(
                list(read_ranges(ranges, conf, RECORD_SCHEMA, reader=reader))
            )

        if "read" not in skip:
            # The readers interleave partitions differently: compare in partition order.
            order = [("partition", "ascending"), ("offset", "ascending")]
            native, python = (read(r).sort_by(order) for r in ("native", "python"))
            differ = [c for c in native.column_names if not native[c].equals(python[c])]
            if differ:
                raise SystemExit(f"read: the two readers' records differ in {differ}")
            print(f"\nread: both readers give the same {native.num_rows:,} records")
            del native, python
            rounds(
                "(read) the topic into the source's record batches",
                {
                    "read_ranges, _rdfetch (C)": lambda: read("native"),
                    "read_ranges, confluent-kafka consume(num_messages=)": lambda: read("python"),
                },
                args.topic_records,
                args,
            )
        if "both" not in skip:
            piece = args.topic_records // 8

            def task(reader: str, flat: bool) -> int:
                rows = 0
                for p, end in sorted(ends.items()):
                    for lo in range(0, end, piece):
                        rng = OffsetRange("parse", p, lo, min(lo + piece, end))
                        for block in read_ranges([rng], conf, RECORD_SCHEMA, reader=reader):
                            rows += split_block(block, payload, [], flat=flat).rows.num_rows
                if rows != args.topic_records:
                    raise SystemExit(f"both: typed {rows:,} of {args.topic_records:,}")
                return rows

            rounds(
                f"(both) read and split_block, ranges of {piece:,} offsets",
                {
                    "_rdfetch + _flatjson (C, C)": lambda: task("native", True),
                    "_rdfetch + Arrow's reader (C, library)": lambda: task("native", False),
                    "consume() + _flatjson (library, C)": lambda: task("python", True),
                    "consume() + Arrow's reader (library, library)": lambda: task("python", False),
                },
                args.topic_records,
                args,
            )
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=200_000, help="values per parse batch")
    ap.add_argument("--topic-records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip", default="", help="comma list of parts to skip: parse,read,both")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if "parse" not in skip:
        run_parse(args)
    if not {"read", "both"} <= skip:
        run_kafka(args, skip)


if __name__ == "__main__":
    main()
