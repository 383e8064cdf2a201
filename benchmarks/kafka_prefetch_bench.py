"""The Kafka read's prefetch settings: CPU to read and type records in ranges that end
inside a partition, as an Arrow-path task reads a micro-batch's.

    flock /tmp/warehouse-bench.lock .venv/bin/python benchmarks/kafka_prefetch_bench.py \\
        [--records 1000000] [--piece 125000] [--rounds 3]

Produces `--records` JSON records of ~183 B (the ingest benchmark's) into 4 partitions of
a bundled broker, then per setting reads them in ranges of `--piece` offsets, one
consumer per range (`read_ranges` with the column reader, as `fetch.consumer_config`
configures it plus the setting), and types each block with `split_block`, the work a
task does between two reads. Printed per setting: this process's CPU (librdkafka's
threads included) and the broker's, per 1M records, and the wall time; the best of
`--rounds` rounds, the settings taking turns. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, this directory is on the path.
from kafka_ingest_bench import ods_payload, produce_records
from proc_cpu import proc_stat, stat_cpu

SETTINGS: dict[str, dict[str, Any]] = {
    "consumer_config's": {},
    "256 MiB queued, 16 MiB per partition fetch": {
        "queued.max.messages.kbytes": 256 * 1024,
        "max.partition.fetch.bytes": 16 << 20,
    },
    "4 MiB queued, 4 MiB per partition fetch": {"max.partition.fetch.bytes": 4 << 20},
    "16 MiB queued": {"queued.max.messages.kbytes": 16 * 1024},
}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--piece", type=int, default=125_000, help="offsets per range")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from pyspark.sql.pandas.types import to_arrow_schema

    from streams.broker.launcher import BrokerProcess
    from streams.kafka import SCHEMA_WITHOUT_HEADERS, OffsetRange, consumer_config, end_offsets
    from streams.kafka.fetch import read_ranges
    from streams.landing.arrow_json import split_block

    payload = ods_payload()
    source = to_arrow_schema(SCHEMA_WITHOUT_HEADERS, timezone="UTC")
    work = Path(tempfile.mkdtemp(prefix="prefetch-bench-"))
    broker = BrokerProcess(work / "broker").start()
    try:
        produce_records(broker.bootstrap, "prefetch", args.records, 200, 4)
        ends = end_offsets(broker.bootstrap, "prefetch")["prefetch"]

        def broker_cpu() -> float:
            return stat_cpu(proc_stat(f"/proc/{broker.pid}/stat")[1])

        best: dict[str, tuple[float, float, float]] = {}
        for _ in range(args.rounds):
            for name, extra in SETTINGS.items():
                b0, c0, w0 = broker_cpu(), time.process_time(), time.perf_counter()
                rows = 0
                for part, end in sorted(ends.items()):
                    for lo in range(0, end, args.piece):
                        rng = OffsetRange("prefetch", part, lo, min(lo + args.piece, end))
                        conf = consumer_config(
                            broker.bootstrap, {}, isolation_level="read_committed", size=rng.size
                        )
                        conf.update(extra)
                        for block in read_ranges([rng], conf, source, reader="native"):
                            rows += block.num_rows
                            split_block(block, payload, [], explain=True)
                if rows != args.records:
                    raise SystemExit(f"{name}: read {rows:,} records of {args.records:,}")
                per_m = 1_000_000 / rows
                got = (
                    (time.process_time() - c0) * per_m,
                    (broker_cpu() - b0) * per_m,
                    time.perf_counter() - w0,
                )
                if name not in best or sum(got[:2]) < sum(best[name][:2]):
                    best[name] = got
        print(f"{args.records:,} records in ranges of {args.piece:,}, best of {args.rounds}:")
        for name, (mine, brk, wall) in best.items():
            print(
                f"  {name:<45} cpu per 1M: {mine:.2f} s here + {brk:.2f} s broker"
                f" = {mine + brk:.2f} s; wall {wall:.2f} s",
                flush=True,
            )
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
