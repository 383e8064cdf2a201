"""A fresh command's fixed cost: `warehouse run --layer ods --once` of a small topic.

    flock /tmp/warehouse-bench.lock .venv/bin/python benchmarks/fresh_run_bench.py \\
        [--records 1000] [--engines python,native] [--rounds 3] \\
        [--checkout NAME=PATH ...] [--logs DIR]

Starts the bundled broker, produces one topic as `kafka_ingest_sizes.py` makes them (4
partitions, ~183 B a record), then in each round, for each checkout and engine in turn,
runs `warehouse --project DIR run --layer ods --once -v` on a fresh project of one ODS
table without an expectation, in a new process whose `PYTHONPATH` is the checkout (so
two checkouts of the framework take turns in one run on one venv). At a thousand
records the batch is a small part: what is measured is what every fresh command pays.
Per run: its wall time, its phases from the `-v` log (`ingest_cli_bench.phases`: py,
session, compile, start, batch, end) and its CPU seconds by process from /proc (the
driver's Python, the JVM, Spark's Python workers). The table is read back and checked
after each run (not timed). Prints each run and, per checkout and engine, the median of
the rounds. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from ingest_cli_bench import PHASES, run_case  # noqa: E402
from kafka_ingest_sizes import produce  # noqa: E402

KINDS = ("python", "jvm", "python workers")


def run_once(
    work: Path,
    bootstrap: str,
    topic: str,
    records: int,
    engine: str,
    checkout: Path,
    name: str,
    logs: Path | None,
) -> dict:
    """One fresh command on `checkout`: wall, phases, CPU by kind; the table checked."""
    got = run_case(
        work, bootstrap, topic, records, engine, 4, expect=False, logs=logs, name=name,
        env={**os.environ, "PYTHONPATH": str(checkout)},
    )  # fmt: skip
    return {"wall": got["wall"], "split": got["split"],
            "cpu": {k: got["cpu"].get(k, 0.0) for k in KINDS}}  # fmt: skip


def _line(label: str, got: dict) -> str:
    split = " / ".join(f"{got['split'][k]:.1f}" for k in PHASES)
    cpu = ", ".join(f"{k} {got['cpu'][k]:.1f}" for k in KINDS)
    return (
        f"{label:<24} wall {got['wall']:.1f}s ({split}); cpu {sum(got['cpu'].values()):.1f}s "
        f"({cpu})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--engines", default="python,native")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--checkout",
        action="append",
        metavar="NAME=PATH",
        help="a checkout of the framework to run (its PYTHONPATH); repeat to alternate "
        "(default: this one)",
    )
    ap.add_argument("--logs", type=Path, help="keep each run's output in this folder")
    args = ap.parse_args()
    checkouts = [
        (name, Path(path).resolve())
        for name, path in (c.partition("=")[::2] for c in args.checkout or [f"here={REPO}"])
    ]
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
    from streams.broker.launcher import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="fresh-run-bench-"))
    broker = BrokerProcess(work / "broker").start()
    runs: dict[tuple[str, str], list[dict]] = {}
    try:
        topic = f"fresh-{os.getpid()}"
        produce(broker.bootstrap, topic, args.records, 200, 4)
        print(f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
        for r in range(args.rounds):
            for engine in args.engines.split(","):
                for name, path in checkouts:
                    label = f"{engine} {name} r{r + 1}"
                    got = run_once(
                        work,
                        broker.bootstrap,
                        topic,
                        args.records,
                        engine,
                        path,
                        f"{engine}-{name}-r{r + 1}",
                        args.logs,
                    )
                    runs.setdefault((engine, name), []).append(got)
                    print(f"{_line(label, got)}; load {os.getloadavg()[0]:.1f}", flush=True)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
        print(
            "-- median of the rounds (wall, phases py / session / compile / start / batch / end; cpu)"
        )
        for (engine, name), got in runs.items():
            med = {
                "wall": statistics.median(g["wall"] for g in got),
                "split": {k: statistics.median(g["split"][k] for g in got) for k in PHASES},
                "cpu": {k: statistics.median(g["cpu"][k] for g in got) for k in KINDS},
            }
            print(_line(f"{engine} {name}", med))
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
