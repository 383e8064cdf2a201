"""The ingest as a user runs it: `warehouse run --layer ods --once`, a fresh process per size.

    flock /tmp/warehouse-bench.lock .venv/bin/python benchmarks/ingest_cli_bench.py \\
        [--sizes 100000,3100000] [--engines python,native] [--rounds 1] [--size 200] \\
        [--partitions 4] [--logs DIR]

Starts the bundled broker (`python -m streams.broker`) and, for each size, a topic of
that many JSON records as `kafka_ingest_sizes.py` makes them (4 partitions, ~183 B, one
record in a thousand cut off, one in a thousand with a null `order_id`). Then in each
round, on each size's topic: (k) kcat (`kcat -C -e -o beginning`) reading it once, and
on each engine (e) an ODS table without an expectation and (q) the same table with
`expect_column_values_to_not_be_null: {column: order_id}, on_violation: quarantine`, each
a fresh project folder run by `warehouse --project DIR run --layer ods --once -v` in a
new process: its Python starts, its JVM starts cold (with the class archive `make
install` made), the project compiles, the query runs what the topic holds and the
process exits. The command's whole wall time is the case's time. After each run (not
timed) the table and its quarantine are read back and checked record by record
(`kafka_ingest_sizes.verify`); a mismatch stops the benchmark.

From the run's INFO log (`-v`), the command's time split into: `py` (from the process's
start to the project loaded: the interpreter and the CLI's imports), `session` (the
SparkSession's start: the JVM, Spark's context), `compile` (the run's checks before the
session, the tables' locks and checkpoints, and from the engines chosen to the query's
start: the project's programs, the landing path's probe where it asks),
`start` (the query's start to its first batch: the checkpoint, the source's first
offsets, the batch's planning), `batch` (the batches' own time, the runner's line per
batch), `end` (the last batch to the process's exit). CPU: the command's process and
every process under it (the JVM, Spark's Python workers), read from /proc every 0.1 s,
the last reading of each process counted, and the JVM's by thread group (`proc_cpu`:
Spark's tasks, the JIT's compilers, the GC, the rest).

Per case, the fastest round at each size counts, and so does kcat's fastest read of
each size (with `--rounds 1`, one read); the marginal rate between the smallest and the
largest size, (large - small) / (t_large - t_small), of the whole command and of the
batches alone, and its ratio to kcat's in the same run (docs/decisions/0004). Not a
test: nothing is asserted. `--driver-options NAME=OPTIONS` (repeated) runs each case
once per variant, the variants taking turns, each with those Java options for the
driver in its project's `spark.conf`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from ingest_runs import run_kcat  # noqa: E402
from kafka_ingest_sizes import ods_project, produce, verify  # noqa: E402
from proc_cpu import jvm_threads, processes  # noqa: E402

WAREHOUSE = Path(sys.executable).parent / "warehouse"
PHASES = ("py", "session", "compile", "start", "batch", "end")

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO (\S+): (.*)$")
_BATCH = re.compile(r"^table ods_bench: batch \d+(?: \([^)]*\))?: (\d+) rows in, .* ([\d.]+)s$")


class TreeCpu:
    """CPU seconds of a process and everything under it, sampled from /proc until `stop`:
    a process's last reading counts, so one that lived under 0.1 s may be missed and each
    loses at most its last 0.1 s."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: dict[int, tuple[str, float]] = {}
        self.threads: dict[tuple[int, int], tuple[str, float, float]] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._done.is_set():
            seen = processes(self.pid)
            self.seen.update(seen)
            self.threads.update(jvm_threads([p for p, (k, _) in seen.items() if k == "jvm"]))
            self._done.wait(0.1)

    def stop(self) -> dict[str, float]:
        self._done.set()
        self._thread.join()
        out: dict[str, float] = {}
        for kind, cpu in self.seen.values():
            kind = "python" if kind == "driver" else kind
            out[kind] = out.get(kind, 0.0) + cpu
        for group, cpu, _ in self.threads.values():
            out[f"jvm {group}"] = out.get(f"jvm {group}", 0.0) + cpu
        return out


def phases(log: str, began: float, ended: float) -> tuple[dict[str, float], int, int]:
    """(seconds per phase of `PHASES`, batches, rows read) from a run's `-v` output;
    `began`/`ended`: the process's start and exit (epoch seconds)."""
    stamps: list[tuple[float, str, str]] = []
    for line in log.splitlines():
        m = _STAMP.match(line)
        if m:
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            stamps.append((at, m.group(2), m.group(3)))

    def first(logger: str, text: str = "") -> float:
        for at, name, msg in stamps:
            if name == logger and text in msg:
                return at
        raise SystemExit(f"no `{logger}: {text}` line in the run's log:\n{log[-3000:]}")

    batches = [(at, _BATCH.match(msg)) for at, name, msg in stamps if name.endswith(".writer")]
    batches = [(at, m) for at, m in batches if m]
    if not batches:
        raise SystemExit(f"no batch line in the run's log:\n{log[-3000:]}")
    batch_s = sum(float(m.group(2)) for _, m in batches)
    rows = sum(int(m.group(1)) for _, m in batches)
    loaded = first("warehouse.project", "loaded project")
    session = first("warehouse.runtime.session", "starting a SparkSession")
    engines = first("warehouse.runtime.engines")
    query = first("warehouse.runtime.query", "starting query")
    first_batch_end, first_batch = batches[0]
    first_start = first_batch_end - float(first_batch.group(2))
    split = {
        "py": loaded - began,
        "session": engines - session,
        "compile": query - engines + (session - loaded),
        "start": first_start - query,
        "batch": batch_s,
        # the runner's gaps between batches too, where a backlog takes several
        "end": ended - first_start - batch_s,
    }
    return split, len(batches), rows


def run_case(
    work: Path,
    bootstrap: str,
    topic: str,
    records: int,
    engine: str,
    partitions: int,
    *,
    expect: bool,
    logs: Path | None,
    name: str,
    java: str = "",
    env: dict[str, str] | None = None,
) -> dict:
    """One fresh `warehouse run --layer ods --once` of the case, checked: its wall time,
    phases, CPU by kind, batches and the check's line. `env`: the command's environment
    (this process's by default)."""
    from warehouse import Project

    root = ods_project(work / name, bootstrap, topic, engine, expect=expect, java=java)
    cmd = [str(WAREHOUSE), "--project", str(root), "run", "--layer", "ods", "--once", "-v"]
    began = time.time()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    cpu = TreeCpu(proc.pid)
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    ended = time.time()
    used = cpu.stop()
    if logs is not None:
        (logs / f"{name}.log").write_text(out)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: `warehouse run` exited {proc.returncode}:\n{out[-3000:]}")
    split, batches, rows = phases(out, began, ended)
    if rows != records:
        raise SystemExit(f"{name}: the batches read {rows:,} records, expected {records:,}")
    checked = verify(Project.load(root), records, partitions, expect=expect)
    shutil.rmtree(root, ignore_errors=True)
    return {"wall": wall, "split": split, "cpu": used, "batches": batches, "checked": checked}


def _cpu_text(used: dict[str, float]) -> str:
    kinds = {k: v for k, v in used.items() if k != "broker" and not k.startswith("jvm ")}
    parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(kinds.items()))
    threads = ", ".join(
        f"{k[4:]} {v:.1f}"
        for k, v in sorted(used.items(), key=lambda kv: -kv[1])
        if k[:4] == "jvm "
    )
    return f"cpu {sum(kinds.values()):.1f} s ({parts}); jvm by thread: {threads}"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="100000,3100000")
    ap.add_argument("--engines", default="python,native")
    ap.add_argument("--cases", default="e,q", help="e (no expectation), q (quarantine), or both")
    ap.add_argument("--size", type=int, default=200, help="approximate value size in bytes")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1, help="fastest of this many runs counts")
    ap.add_argument("--logs", type=Path, help="keep each run's output in this folder")
    ap.add_argument(
        "--driver-options",
        action="append",
        metavar="NAME=OPTIONS",
        help="a variant of every case whose project's `spark.conf` gives the driver these "
        "Java options (`spark.driver.extraJavaOptions`), e.g. `c1=-XX:TieredStopAtLevel=1`; "
        "repeat for more, the variants taking turns within each size",
    )
    args = ap.parse_args()
    variants = [v.partition("=")[::2] for v in args.driver_options or ["="]]
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
    cases = [
        (f"({case}) {engine}" + (f" {variant}" if variant else ""), engine, case == "q", java)
        for engine in args.engines.split(",")
        for case in args.cases.split(",")
        for variant, java in variants
    ]

    from streams.broker.launcher import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="ingest-cli-bench-"))
    broker = BrokerProcess(work / "broker").start()
    try:
        bootstrap = broker.bootstrap
        topics = {}
        for n in sizes:
            topics[n] = f"cli-{n}-{os.getpid()}"
            t0 = time.perf_counter()
            produce(bootstrap, topics[n], n, args.size, args.partitions)
            print(f"produced {n:,} records into {topics[n]} in {time.perf_counter() - t0:.1f}s")
        print(f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
        best: dict[tuple[str, int], dict] = {}
        kcat: dict[int, float] = {}
        for r in range(args.rounds):
            for n in sizes:
                print(f"-- round {r + 1}, {n:,} records", flush=True)
                dt = run_kcat(bootstrap, topics[n], n)
                if dt is None:
                    raise SystemExit("kcat is not installed: no baseline")
                kcat[n] = min(kcat.get(n, dt), dt)
                for label, engine, expect, java in cases:
                    got = run_case(
                        work,
                        bootstrap,
                        topics[n],
                        n,
                        engine,
                        args.partitions,
                        expect=expect,
                        logs=args.logs,
                        name=f"{re.sub(r'[^a-z0-9]+', '-', label).strip('-')}-{n}-r{r + 1}",
                        java=java,
                    )
                    split = " ".join(f"{k} {got['split'][k]:.1f}" for k in PHASES)
                    print(
                        f"{label:<16} {n / got['wall']:>10,.0f} rows/s, command {got['wall']:.1f}s "
                        f"({split}), {got['batches']} batch(es), load "
                        f"{os.getloadavg()[0]:.1f}\n    {_cpu_text(got['cpu'])}\n"
                        f"    {got['checked']}",
                        flush=True,
                    )
                    key = (label, n)
                    if key not in best or got["wall"] < best[key]["wall"]:
                        best[key] = got
        print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)
        if len(sizes) < 2:
            return
        small, large = sizes[0], sizes[-1]
        k_rate = (large - small) / (kcat[large] - kcat[small])
        print(f"-- marginal rate between {small:,} and {large:,} records (fastest round)")
        print(f"(k) kcat -C -e   {k_rate:>10,.0f} rows/s ({kcat[small]:.2f}s, {kcat[large]:.2f}s)")
        for label, *_ in cases:
            lo, hi = best[(label, small)], best[(label, large)]
            rate = (large - small) / (hi["wall"] - lo["wall"])
            b_rate = (large - small) / (hi["split"]["batch"] - lo["split"]["batch"])
            print(
                f"{label:<16} {rate:>10,.0f} rows/s, to (k) {rate / k_rate:.2f}; batches only "
                f"{b_rate:,.0f} rows/s, to (k) {b_rate / k_rate:.2f}  (command {lo['wall']:.1f}s"
                f" -> {hi['wall']:.1f}s, batches {lo['split']['batch']:.1f}s -> "
                f"{hi['split']['batch']:.1f}s)",
                flush=True,
            )
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
