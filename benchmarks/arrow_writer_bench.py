"""The Arrow path's Parquet writer (`streams.delta.files.file_writer`) against the
settings it replaced: CPU and file size for an ODS table's typed rows.

    .venv/bin/python benchmarks/arrow_writer_bench.py [--rows 1000000] [--reps 3]

Types `--rows` JSON records of the ingest benchmark's shape (`split_block`, blocks of
10,000 as the Kafka reader hands them over) once, then writes them per setting, each
the fastest of `--reps`:

- `file_writer`: the Arrow path's writer (a dictionary for text columns only, row
  groups of up to `ROW_GROUP_BYTES` of buffered blocks, zstd level 1, Delta stats);
- a dictionary for every column but `_offset`, one row group per block (what
  `file_writer` did before), with pyarrow's `ParquetWriter` directly;
- the same with row groups of 13 blocks;
- a dictionary for text columns, one row group per block.

Printed: this process's CPU per 1M rows and the bytes written. Not a test: nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq


def typed_blocks(rows: int) -> list[pa.RecordBatch]:
    from kafka_ingest_bench import ods_payload, ods_value

    from streams.landing.arrow_json import split_block

    payload = ods_payload()
    note = "x" * 90
    out = []
    for lo in range(0, rows, 10_000):
        ids = range(lo, min(lo + 10_000, rows))
        values = [ods_value(i, note) for i in ids]
        n = len(values)
        raw = pa.record_batch(
            {
                "key": pa.array([str(i).encode() for i in ids], pa.binary()),
                "value": pa.array(values, pa.binary()),
                "topic": pa.array(["bench"] * n),
                "partition": pa.array([i % 4 for i in ids], pa.int32()),
                "offset": pa.array([i // 4 for i in ids], pa.int64()),
                "timestamp": pa.array(
                    [1_763_700_000_000_000 + i * 20 for i in ids], pa.timestamp("us", "UTC")
                ),
                "timestampType": pa.array([0] * n, pa.int32()),
            }
        )
        out.append(split_block(raw, payload).rows)
    return out


def _pyarrow(dictionary: Callable[[pa.Schema], list[str]], blocks_per_group: int):
    def write(root: str, blocks: list[pa.RecordBatch]) -> None:
        schema = blocks[0].schema
        with pq.ParquetWriter(
            os.path.join(root, "part.parquet"),
            schema,
            compression="zstd",
            compression_level=1,
            use_dictionary=dictionary(schema),
        ) as w:
            for i in range(0, len(blocks), blocks_per_group):
                w.write_table(pa.Table.from_batches(blocks[i : i + blocks_per_group]))

    return write


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    from streams.delta.files import dictionary_columns, file_writer

    blocks = typed_blocks(args.rows)
    schema = blocks[0].schema

    def framework(root: str, blocks: list[pa.RecordBatch]) -> None:
        list(file_writer(root, schema, [], ["_offset"])(iter(blocks)))

    def all_but_offset(s: pa.Schema) -> list[str]:
        return [f.name for f in s if f.name != "_offset"]

    def text(s: pa.Schema) -> list[str]:
        return dictionary_columns(s, ["_offset"])

    settings = {
        "file_writer": framework,
        "every column but _offset, a row group per block": _pyarrow(all_but_offset, 1),
        "every column but _offset, 13 blocks a row group": _pyarrow(all_but_offset, 13),
        "text columns, a row group per block": _pyarrow(text, 1),
    }
    work = tempfile.mkdtemp(prefix="arrow-writer-bench-")
    try:
        print(f"{args.rows:,} rows, {len(blocks)} blocks; best of {args.reps}:")
        for name, write in settings.items():
            best, size = float("inf"), 0
            for rep in range(args.reps):
                root = os.path.join(work, f"{len(name)}-{rep}")
                os.makedirs(root)
                c0 = time.process_time()
                write(root, blocks)
                best = min(best, time.process_time() - c0)
                size = sum(
                    os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs
                )
                shutil.rmtree(root)
            print(
                f"  {name:<50} {best * 1_000_000 / args.rows:.2f} s per 1M rows,"
                f" {size / 1e6:5.1f} MB",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
