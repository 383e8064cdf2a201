"""What publishing a table's new version costs: a `publish_changes` call with clients of
its own against a kept `Publisher`.

    .venv/bin/python benchmarks/publish_bench.py [--versions 30] [--rounds 2]

A table with `publish` publishes after every batch it commits, inside the batch
(`warehouse.runtime.writer`). The script starts the bundled broker, creates a Delta
table with the framework's table configuration, and then, per kind and round, appends
one row at a time and publishes it, `--versions` times: each call publishes one version
(one record, one transaction). It prints, per kind, the median, mean and slowest call's
wall time (the first call, which creates the topic, left out), and the CPU of this
process and of the broker over those calls, per call. The kinds alternate within a
round.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake
from proc_cpu import proc_stat, stat_cpu

from streams.broker.launcher import BrokerProcess
from streams.cdc import Publisher, publish_changes
from streams.delta.target import TABLE_CONFIGURATION


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", type=int, default=30, help="versions published per kind")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of both kinds")
    args = ap.parse_args()
    if args.versions < 2:
        ap.error(
            "--versions must be at least 2 (the first call, which creates the topic, is left out)"
        )

    configuration = {k: str(v).lower() for k, v in TABLE_CONFIGURATION.items()}
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "broker").start()
        broker_pid = broker.pid

        def broker_cpu() -> float:
            return stat_cpu(proc_stat(f"/proc/{broker_pid}/stat")[1])

        try:
            for rnd in range(1, args.rounds + 1):
                for kind in ("publish_changes", "Publisher"):
                    name = f"t{rnd}_{kind.lower()}"
                    path = str(Path(tmp) / name)
                    write_deltalake(path, pa.table({"k": [0]}), configuration=configuration)
                    kw = {
                        "bootstrap": broker.bootstrap,
                        "topic": f"mv.{name}",
                        "keys": ["k"],
                        "table": name,
                    }
                    kept = Publisher(path, **kw) if kind == "Publisher" else None
                    wall: list[float] = []
                    own = 0.0
                    for i in range(1, args.versions + 1):
                        write_deltalake(path, pa.table({"k": [i]}), mode="append")
                        if i == 2:  # the first call, which creates the topic, left out
                            own, brk0 = 0.0, broker_cpu()
                        c0, t0 = _own_cpu(), time.perf_counter()
                        kept.publish() if kept else publish_changes(path, **kw)
                        wall.append(time.perf_counter() - t0)
                        own += _own_cpu() - c0
                    brk = broker_cpu() - brk0
                    if kept:
                        kept.close()
                    calls = len(wall) - 1
                    print(
                        f"round {rnd}, {kind}: {calls} calls, wall median "
                        f"{1000 * statistics.median(wall[1:]):.1f} ms, mean "
                        f"{1000 * statistics.fmean(wall[1:]):.1f} ms, slowest "
                        f"{1000 * max(wall[1:]):.1f} ms; CPU per call "
                        f"{1000 * own / calls:.1f} ms here, {1000 * brk / calls:.1f} ms broker",
                        flush=True,
                    )
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
