"""What asking whether the Arrow landing path can run for a table costs at compile time
(`streams.landing.landing_blocker`, docs/decisions/0050): the probe job whose tasks
import the path's modules and write and delete an object under the table, against a
job of the same number of tasks that does nothing (Spark's own floor for a job), in the
same session.

    .venv/bin/python benchmarks/landing_probe_bench.py [--tables 8]

A `local[2]` session with the object-storage jars and the S3-API server of the tests
(`tests/support/s3.py`, its AWS variables in this process's environment); the tables are
on S3, so every call runs the probe (a local session over local tables is not asked).
The first probe also starts the Python workers and imports pyarrow and delta-rs in them,
which the table's first batch would otherwise do; it is printed apart. Not a test:
nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=8, help="probes after the first")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from tests.support.s3 import plan

    s3 = plan()  # sets the AWS variables before the session's JVM starts
    s3.start()
    try:
        import streams.storage as storage
        from streams.landing import landing_blocker
        from warehouse.runtime.session import get_session
        from warehouse.spec.config import SparkSettings

        spark = get_session(
            SparkSettings(master="local[2]", conf={"spark.default.parallelism": "2"}),
            app_name="landing-probe-bench",
            object_storage=True,
        )
        spark.sparkContext.setLogLevel("ERROR")
        root = f"s3a://{s3.create_bucket('probe-bench')}/wh"
        sc = spark.sparkContext

        def timed(call) -> float:
            start = time.monotonic()
            call()
            return time.monotonic() - start

        def probe(i: int) -> None:
            reason = landing_blocker(spark, storage.join(root, f"t{i}"))
            assert reason is None, reason

        first = timed(lambda: probe(0))
        probes, floors = [], []
        for i in range(1, args.tables + 1):
            floors.append(timed(lambda: sc.parallelize(range(2), 2).count()))
            probes.append(timed(lambda i=i: probe(i)))
        load = os.getloadavg()[0]
        p, f = statistics.median(probes), statistics.median(floors)
        print(f"load average {load:.1f}; first probe (Python workers start) {first:.2f} s")
        print(f"probe, median of {len(probes)}: {p:.3f} s; an empty 2-task job: {f:.3f} s")
        print(f"probe / empty job: {p / f:.1f}x")
        spark.stop()
    finally:
        s3.stop()


if __name__ == "__main__":
    main()
