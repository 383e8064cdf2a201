"""End-to-end latency of the example warehouse in continuous mode.

    .venv/bin/python benchmarks/latency_bench.py [--seconds 180] [--rate 10]
        [--probe-every 5] [--initial-events 300] [--bootstrap HOST:PORT]
        [--chain-only] [--trigger "5 seconds"] [--engines python,native]
        [--copies 2] [--idle-seconds 30] [--job-kinds] [--off-path-trigger "30 seconds"]
        [--warmup-seconds 240] [--threads] [--snapshot-max-age "10 seconds"]
        [--stacks 0.5] [--jfr]

Starts the bundled broker (unless `--bootstrap`), loads the repository's example
project into a temporary warehouse root, produces a first slice of the generator's
timeline and runs every table once so the tables exist, then runs all twelve queries
continuously (`--chain-only`: only the order path `ods_orders`, `dwd_orders`,
`dws_city_gmv_1m`, `ads_city_leaderboard`) while the generator produces `--rate` events
per second in the background. Probing starts once every query has started. Every `--probe-every` seconds it produces one probe order for a probe
user whose city exists only for probes; the probe's effect is the probe city's
`orders` count in `ads_city_leaderboard` reaching the probe's number. Latency =
the moment that count is seen minus the moment the probe order was produced, read
(a) from the ADS Delta table (polled every 0.2 s) and (b) from the published
compacted topic `mv.city_leaderboard` (a read_committed consumer). Prints p50/p99
of both. Not a test: nothing is asserted.

`--copies 2` runs every table twice (24 queries): the copies read the same topics, their
tables and published topics are named `<name>_c2`; the probe is timed on the original
ads table. Before the background producer starts, the queries run idle for
`--idle-seconds`: the CPU of that window over the number of queries is the CPU an idle
query costs. During the probes the CPU and the number of micro-batches are counted too:
(CPU during the probes - idle CPU for as long) / batches is the CPU of a small batch.
`--job-kinds` lists each query's Spark jobs per batch by what they were, and the CPU
their tasks used per batch (what is left of a batch's CPU is the driver's). `--threads`
splits the idle window's CPU by thread (every process's; the driver's Python threads and
the JVM's Java threads by name), and the JVM's CPU during the probes by group of threads
(from /proc: Spark's tasks, the JIT's compilers, the GC, the queries' own threads, the
rest), with the time each group (and each kind of process) spent runnable but waiting
for a core (schedstat), and gives each query's own thread (its planning, Delta's log,
the writer's calls into the JVM) per batch with rows. `--stacks` samples those threads' Java stacks
(`stack_samples.py`) and gives each query's share of samples by phase of a batch
(analysis, optimisation, planning, Delta's log, jobs, Python, ...). `--jfr` records the
JVM with Java Flight Recorder during the probes (`jfr_profile.py`) and gives the share of
its Java threads' CPU samples by kind of work (the Hadoop configuration's serialization,
analysis, code generation, ...), across the JVM and per group of threads.
`--off-path-trigger` puts the eight tables off the probe's path (and every copy) on a
processing-time trigger, as a project would for tables whose freshness can wait.
`--snapshot-max-age` sets `snapshots: {max_age: ...}` on every table whose SQL reads
snapshots (`dwd_orders` and its copies): they join copies kept in Spark's cache.
CPU is user + system of this process and every process under it (the JVM, Spark's
Python workers, the broker), read from /proc, counted by process alive at both ends of a
window. The benchmark's own watchers of the ADS table and the published topic run in a
process of their own (`latency_watchers.py`), start after the idle window, and their CPU
is printed apart, not counted. The session starts as a continuous `warehouse run` starts one
(its JIT: decisions/0056). `BENCH_JAVA_OPTIONS` in the environment goes to the JVM (`spark.driver.extraJavaOptions`), e.g.
`-XX:StartFlightRecording=filename=l.jfr,settings=profile` for a profile.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from jfr_profile import JfrProfile
from proc_cpu import (
    cpu_by_kind,
    cpu_delta,
    jvm_threads,
    proc_stat,
    processes,
    stat_cpu,
    waits_by_kind,
)
from stack_samples import StackSampler

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

REPO = Path(__file__).resolve().parents[1]
CHAIN = ["ods_orders", "dwd_orders", "dws_city_gmv_1m", "ads_city_leaderboard"]
"""The queries between an order and the leaderboard (`--chain-only`)."""
DIMENSIONS = ["dim_users", "dim_products"]
"""Run once first with `--chain-only`: `dwd_orders` joins their snapshots."""
PROBE_USER = "u-probe"
PROBE_CITY = "Probe City"
COPY_SUFFIX = "_c{n}"
SETTLE_SECONDS = 20
"""After the background producer starts (and sends what the idle window held back),
before the first probe."""
RETAIN_JOBS = {"spark.ui.retainedJobs": "100000", "spark.ui.retainedStages": "100000"}
"""Enough for every job and stage of a run, which the jobs per batch are counted over."""


def project_copies(repo: Path, into: Path, copies: int) -> Path:
    """A project at `into` with every table of `repo` `copies` times; copy n > 1 of table
    `t` is `t_c<n>`, reading copy n of its inputs (and the same Kafka topics) and
    publishing to `<topic>_c<n>`."""
    import re

    for part in ("conf", "schemas", "layers"):
        shutil.copytree(repo / part, into / part)
    sources = [p for p in (into / "layers").rglob("*") if p.is_file()]
    names = [
        m.group(1)
        for p in sources
        if p.suffix == ".yml"
        for m in [re.search(r"^table:\s*(\w+)", p.read_text(), re.M)]
        if m
    ]
    published = [
        m.group(1)
        for p in sources
        if p.suffix == ".yml"
        for m in re.finditer(r"publish:.*topic:\s*([\w.]+)", p.read_text())
    ]
    pattern = re.compile(
        r"\b(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b"
    )
    for n in range(2, copies + 1):
        suffix = COPY_SUFFIX.format(n=n)
        for src in sources:
            text = pattern.sub(lambda m, s=suffix: m.group(1) + s, src.read_text())
            for topic in published:
                text = text.replace(f"topic: {topic}", f"topic: {topic}{suffix}")
            src.with_name(f"{src.stem}{suffix}{src.suffix}").write_text(text)
    return into


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def probe_user_record(now: dt.datetime) -> tuple[bytes, bytes]:
    ts = int(now.timestamp() * 1000)
    row = {
        "user_id": PROBE_USER,
        "name": "probe",
        "city": PROBE_CITY,
        "tier": "basic",
        "signup_date": now.date().isoformat(),
    }
    value = {
        "before": None,
        "after": row,
        "op": "c",
        "ts_ms": ts,
        "source": {"db": "shop", "table": "users", "ts_ms": ts},
    }
    return json.dumps({"user_id": PROBE_USER}).encode(), json.dumps(value).encode()


class Watchers:
    """`latency_watchers.py` in a process of its own (its CPU is not the queries'): when
    the probe city's order count first reached n, in the ADS table (`table_seen`) and in
    the published topic (`topic_seen`)."""

    def __init__(self, path: Path, bootstrap: str, topic: str) -> None:
        self.table_seen: dict[int, float] = {}
        self.topic_seen: dict[int, float] = {}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("latency_watchers.py")),
                str(path),
                bootstrap,
                topic,
                PROBE_CITY,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, n, at = line.split()
            (self.table_seen if kind == "table" else self.topic_seen)[int(n)] = float(at)

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self._reader.join(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--rate", type=float, default=10.0, help="background events per second")
    parser.add_argument("--probe-every", type=float, default=5.0)
    parser.add_argument("--initial-events", type=int, default=300)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--chain-only", action="store_true", help="run only the four order-path queries"
    )
    parser.add_argument(
        "--trigger",
        default=None,
        help="run every query on this processing-time interval (`5 seconds`) instead of "
        "what its spec says",
    )
    parser.add_argument(
        "--off-path-trigger",
        default=None,
        help="run the tables off the probe's path (all but the four order-path queries "
        "and their copies' originals) on this processing-time interval (`30 seconds`)",
    )
    parser.add_argument(
        "--snapshot-max-age",
        default=None,
        help="set `snapshots: {max_age: ...}` (`10 seconds`) on every table whose SQL "
        "reads snapshots",
    )
    parser.add_argument(
        "--copies", type=int, default=1, help="run every table this many times (2: 24 queries)"
    )
    parser.add_argument(
        "--job-kinds",
        action="store_true",
        help="also list each query's Spark jobs per batch by kind (action and call site) "
        "and their tasks' CPU per batch",
    )
    parser.add_argument(
        "--threads",
        action="store_true",
        help="also split the JVM's CPU during the probes by group of threads (tasks, JIT, "
        "GC, query threads, other) and give each query's own thread per batch",
    )
    parser.add_argument(
        "--stacks",
        type=float,
        default=None,
        metavar="SECONDS",
        help="also sample the queries' own threads' Java stacks (`jcmd Thread.print`) "
        "this often during the probes: each query's share of samples by phase of a batch",
    )
    parser.add_argument(
        "--jfr",
        action="store_true",
        help="also record the JVM with Java Flight Recorder during the probes: the share of "
        "its Java threads' CPU samples by kind of work",
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=30.0, help="idle window before the producer starts"
    )
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=0.0,
        help="run with the background events for this long before the probes start, so "
        "that they measure a JVM whose JIT has settled",
    )
    parser.add_argument(
        "--engines",
        default=None,
        help="comma-separated engines to run one after the other in this run, each with "
        "its own broker and warehouse root (`python,native`); default: what the "
        "project's conf says (`auto`)",
    )
    parser.add_argument(
        "--concurrent-batches",
        default=None,
        help="the project's `spark.concurrent_batches` for this run (`auto`, or a number; "
        "0: no limit)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting over the project's conf for this run's session "
        "(`spark.driver.memory=3g`); repeatable",
    )
    args = parser.parse_args()
    engines = args.engines.split(",") if args.engines else [None]
    results = [(engine, run_case(args, engine)) for engine in engines]
    if len(results) > 1:
        print("\n== by engine ==")
        for engine, (table, topic) in results:
            print(f"{engine}: table p50/p99 {table}, topic p50/p99 {topic}")
    return 0


def set_triggers(project, every: str | None, off_path: str | None) -> None:
    """`every` table on that processing-time interval, then the tables off the probe's
    path (not in `CHAIN`: the dimensions, the page-view and payment tables, and every
    copy) on `off_path`."""
    from warehouse.spec.table import Trigger

    for name, defn in project.tables.items():
        interval = off_path if off_path and name not in CHAIN else every
        if interval:
            spec = defn.spec.model_copy(update={"trigger": Trigger(interval=interval)})
            project.tables[name] = defn.model_copy(update={"spec": spec})


def keep_snapshots(project, max_age: str | None) -> None:
    """`snapshots: {max_age}` on every table whose SQL reads other tables as snapshots."""
    from warehouse.spec.table import Snapshots

    for name, defn in project.tables.items():
        if max_age and defn.static_tables:
            spec = defn.spec.model_copy(update={"snapshots": Snapshots(max_age=max_age)})
            project.tables[name] = defn.model_copy(update={"spec": spec})
            print(f"{name}: snapshots kept for at most {max_age}", flush=True)


def bench_project(args: argparse.Namespace, work: Path, bootstrap: str, overrides: dict) -> Any:
    """The example project (or `--copies` of it) under `work`, with the run's settings."""
    from warehouse import Project

    repo = REPO if args.copies <= 1 else project_copies(REPO, work / "project", args.copies)
    project = Project.load(
        repo, warehouse_root=str(work / "wh"), kafka={"bootstrap": bootstrap}, **overrides
    )
    set_triggers(project, args.trigger, args.off_path_trigger)
    keep_snapshots(project, args.snapshot_max_age)
    # Spark's status tracker lists only the newest 1000 jobs and stages by default;
    # a native run has more by the time the jobs per batch are counted.
    project.config.spark.conf.update(RETAIN_JOBS)
    for setting in args.conf:
        key, _, value = setting.partition("=")
        project.config.spark.conf[key] = value
    if os.environ.get("BENCH_JAVA_OPTIONS"):
        project.config.spark.conf["spark.driver.extraJavaOptions"] = os.environ[
            "BENCH_JAVA_OPTIONS"
        ]
    return project


def chain_tables(args: argparse.Namespace) -> list[str] | None:
    """The tables of the measured chain (`--chain-only`), in every copy; None: all."""
    if not args.chain_only:
        return None
    if args.copies <= 1:
        return list(CHAIN)
    return [
        f"{t}{COPY_SUFFIX.format(n=n)}" if n > 1 else t
        for n in range(1, args.copies + 1)
        for t in CHAIN
    ]


def send_probes(probe: Any, *, seconds: float, every: float) -> dict[int, float]:
    """Produce a probe order every `every` seconds for `seconds`; the wall time each was
    sent, by probe number."""
    from warehouse.generate import iso

    sent: dict[int, float] = {}
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        order = {
            "order_id": f"probe-{n:05d}",
            "user_id": PROBE_USER,
            "product_id": "p001",
            "quantity": 1,
            "amount": 1.0,
            "currency": "EUR",
            "event_time": iso(dt.datetime.now(dt.UTC)),
        }
        sent[n] = time.time()
        probe.produce("orders", key=order["order_id"].encode(), value=json.dumps(order).encode())
        probe.flush(30)
        time.sleep(every)
    return sent


def run_case(args: argparse.Namespace, engine: str | None) -> tuple[str, str]:
    """One measurement on `engine` (both Kafka and Delta), or on the conf's engines."""
    from confluent_kafka import Producer

    from streams.broker.launcher import BrokerProcess
    from warehouse.demo.continuous import Producer as Background
    from warehouse.demo.continuous import split_timeline
    from warehouse.demo.run import run_once
    from warehouse.generate import ShopGenerator, ensure_topics, produce_records
    from warehouse.runtime.session import get_session

    work = Path(tempfile.mkdtemp(prefix="latency-bench-"))
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = BrokerProcess(work / "broker").start()
        bootstrap = broker.bootstrap
    overrides: dict = {} if engine is None else {"engines": {"kafka": engine, "delta": engine}}
    if args.concurrent_batches is not None:
        overrides["spark__concurrent_batches"] = args.concurrent_batches
    print(f"\n== engines: {engine or 'as the conf says'} ==", flush=True)
    try:
        project = bench_project(args, work, bootstrap, overrides)
        # The JIT of a continuous `warehouse run` (docs/decisions/0056); `--conf
        # spark.driver.extraJavaOptions=-XX:Tier4InvocationThreshold=5000` keeps Java's.
        spark = get_session(project.config.spark, app_name="latency-bench", run="continuous")
        spark.sparkContext.setLogLevel("ERROR")
        ensure_topics(bootstrap)
        gap = 1.0 / args.rate
        span = args.initial_events * gap
        gen = ShopGenerator(
            seed=args.seed,
            start=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=span),
            seconds_per_event=gap,
        )
        head, rest = split_timeline(gen.records(), span)
        produce_records(bootstrap, head)
        probe = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        key, value = probe_user_record(dt.datetime.now(dt.UTC))
        probe.produce("shop.users", key=key, value=value)
        probe.flush(30)
        t0 = time.monotonic()
        chain = chain_tables(args)
        run_once(
            project,
            spark,
            bootstrap=bootstrap,
            tables=[*DIMENSIONS, *chain] if chain else None,
            progress=lambda line: print(f"  once: {line}", flush=True),
        )
        print(f"first run of every layer: {time.monotonic() - t0:.0f}s", flush=True)

        started: list[str] = []
        batches: list[str] = []

        def progress(line: str) -> None:
            if ": started (" in line:
                started.append(line.split(" ", 1)[0])
            print(f"  continuous: {line}", flush=True)

        pipeline = project.pipeline(
            spark,
            "all",
            chain,
            bootstrap=bootstrap,
            progress=progress,
            batch_progress=batches.append,
        )
        runner = threading.Thread(target=pipeline.run, kwargs={"once": False}, daemon=True)
        runner.start()
        t1 = time.monotonic()
        while len(set(started)) < len(pipeline.names) and runner.is_alive():
            time.sleep(0.5)
        print(f"every query started: {time.monotonic() - t1:.0f}s", flush=True)
        idle = measure_idle(
            args.idle_seconds,
            batches,
            thread_reading if args.threads else None,
            lambda: {(tid, name): cpu for tid, (name, cpu) in java_thread_cpu(spark).items()},
        )
        # The watchers start after the idle window: their polls of the ADS table and the
        # published topic are the benchmark's own CPU (and the broker's), not the queries'.
        watchers = Watchers(
            project.table_path("ads_city_leaderboard"), bootstrap, "mv.city_leaderboard"
        )
        background = Background(
            bootstrap, rest, pace_from=span + (time.monotonic() - t0), client_config={}
        )
        background.start()
        time.sleep(SETTLE_SECONDS + args.warmup_seconds)
        cpu0, batches0, t2 = cpu_by_kind(), len(batches), time.monotonic()
        jit0, compiled0 = jit_seconds(spark), codegen_compiled(spark)
        threads0 = thread_cpu(spark) if args.threads else None
        sampler = start_sampler(args.stacks)
        recording = start_jfr() if args.jfr else None
        turns0 = pipeline.gate.turn_seconds() if pipeline.gate is not None else None
        probes_from = dt.datetime.now(dt.UTC)
        sent = send_probes(probe, seconds=args.seconds, every=args.probe_every)
        stacks = stop_sampler(sampler)
        if recording is not None:
            recording.stop()
        n = len(sent)
        busy = cpu_delta(cpu0, cpu_by_kind()), len(batches) - batches0, time.monotonic() - t2
        turns = turns_since(pipeline.gate, turns0)
        jit, ran_for = jit_seconds(spark) - jit0, time.monotonic() - t0
        compiled = tuple(b - a for a, b in zip(compiled0, codegen_compiled(spark), strict=True))
        breakdown = batch_breakdown(spark) + (job_kinds(spark) if args.job_kinds else "")
        if threads0 is not None:
            breakdown += thread_split(spark, threads0, probes_from)
        breakdown += stacks + (recording.report() if recording is not None else "")
        # let the last probes through, then stop at a batch boundary
        settle = time.monotonic() + 120
        while time.monotonic() < settle and (
            len(watchers.table_seen) < n or len(watchers.topic_seen) < n
        ):
            time.sleep(1)
        pipeline.request_stop()
        background.stop.set()
        runner.join(timeout=300)
        watchers.stop()
        report_cpu(len(pipeline.names), idle, busy)
        print(
            f"JIT compiling during the probes: {jit / busy[2]:.2f} s/s "
            f"(they ended {ran_for:.0f}s after the tables' first run began)"
        )
        print(
            f"Spark compiled {compiled[0]} generated classes during the probes "
            f"({compiled[0] / max(busy[1], 1):.1f} per batch), the JVM loaded {compiled[1]} classes"
        )
        report_gate(pipeline.gate, turns, busy[2])
        print(breakdown)
        return report(sent, watchers.table_seen, watchers.topic_seen, args)
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def start_sampler(every: float | None) -> StackSampler | None:
    """A running `StackSampler` of the session's JVM (`--stacks`), or None."""
    if not every:
        return None
    jvm = next(pid for pid, (kind, _) in processes().items() if kind == "jvm")
    sampler = StackSampler(jvm, every=every)
    sampler.start()
    return sampler


def start_jfr() -> JfrProfile:
    """A Flight Recorder recording of the session's JVM (`--jfr`), started."""
    jvm = next(pid for pid, (kind, _) in processes().items() if kind == "jvm")
    java_home = os.path.dirname(os.path.dirname(os.path.realpath(f"/proc/{jvm}/exe")))
    recording = JfrProfile(jvm, java_home=java_home)
    recording.start()
    return recording


def stop_sampler(sampler: StackSampler | None) -> str:
    """Stop `sampler` and give its report ("" without one)."""
    if sampler is None:
        return ""
    sampler.stop()
    return sampler.report()


def turns_since(gate, before: tuple[float, float] | None) -> tuple[float, float] | None:
    """The gate's turn-seconds (held, kept) since `before` (None without a gate)."""
    if gate is None or before is None:
        return None
    return tuple(b - a for a, b in zip(before, gate.turn_seconds(), strict=True))


def report_gate(gate, turns: tuple[float, float] | None, seconds: float) -> None:
    """How many batches wrote at once, and how many turns were in use on average."""
    if gate is None:
        print("batches writing at once: no limit (`spark.concurrent_batches` 0)")
        return
    print(
        f"batches writing at once: at most {gate.slots}, deepest table first "
        "(addBatch below includes the wait for a turn)"
    )
    print(
        f"turns in use during the probes: {turns[0] / seconds:.2f} of {gate.slots} on "
        f"average, {turns[1] / seconds:.2f} of them kept for a landing table's next batch"
    )


Cpu = tuple[dict[str, float], int, float]
"""CPU seconds by kind, micro-batches run, and wall seconds of one window."""


def measure_idle(seconds: float, batches: list[str], threads=None, java_threads=None) -> Cpu:
    """The CPU of the running queries while nothing is produced (after the batches that
    the start's backlog may still cause: the window opens once no batch ran for 5 s).
    `threads` (`--threads`): `thread_reading`, taken at both ends of the window with
    `java_threads` (the JVM's threads by id: name and CPU), their difference printed by
    thread."""
    quiet_since, seen = time.monotonic(), len(batches)
    deadline = quiet_since + 120
    while time.monotonic() < deadline and time.monotonic() - quiet_since < 5:
        time.sleep(0.5)
        if len(batches) != seen:
            quiet_since, seen = time.monotonic(), len(batches)
    java = java_threads() if threads else None
    reading = threads() if threads else None
    # This thread only sleeps and measures meanwhile: its walks of /proc (tens of ms
    # each) are not the queries' CPU.
    me = threading.get_native_id()
    cpu0, n0, t0 = cpu_by_kind(without_thread=me), len(batches), time.monotonic()
    time.sleep(seconds)
    cpu, wall = cpu_delta(cpu0, cpu_by_kind(without_thread=me)), time.monotonic() - t0
    if reading is not None:
        # /proc is read next to the window's ends; the Java threads' reading (calls into
        # the JVM) outside them.
        after = threads()
        print(idle_split((reading, java), (after, java_threads()), wall), flush=True)
    return cpu, len(batches) - n0, wall


def thread_reading() -> dict[tuple[int, int, str, str], float]:
    """CPU seconds so far of every thread of this process tree by (process, thread id,
    kind of process, thread name): the driver's Python threads by their `threading`
    names, the JVM's as /proc names them (15 characters), the other processes' by their
    command."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[tuple[int, int, str, str], float] = {}
    for pid, (kind, _cpu) in processes().items():
        try:
            tids = os.listdir(f"/proc/{pid}/task")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        for tid in tids:
            try:
                comm, fields = proc_stat(f"/proc/{pid}/task/{tid}/stat")
            except OSError:
                continue
            if kind == "driver":
                name = names.get(int(tid), f"(no Python thread) {comm}")
            elif kind == "jvm":
                name = comm
            else:
                name = " ".join(cmd.split()[1:3])[:60]
            out[(pid, int(tid), kind, name)] = stat_cpu(fields)
    return out


def idle_split(before, after, wall: float) -> str:
    """The idle window's CPU (ms per second) by thread, from two (`thread_reading`,
    `java_thread_cpu`) pairs: by thread (threads gone by the end not counted), those of
    one name summed, digits read as `N`."""
    import re

    def rows(b: dict, a: dict, top: int) -> list[tuple[object, float]]:
        used: dict[object, float] = {}
        for k, v in a.items():
            name = tuple(re.sub(r"\d+", "N", part) for part in k if isinstance(part, str))
            used[name] = used.get(name, 0.0) + max(0.0, v - b.get(k, 0.0)) / wall * 1000
        return sorted(((k, v) for k, v in used.items() if v >= 0.05), key=lambda kv: -kv[1])[:top]

    lines = [f"\nidle window by thread, ms of CPU per second ({wall:.0f}s):"]
    lines += [f"  {v:7.2f}  {kind}: {name}" for (kind, name), v in rows(before[0], after[0], 40)]
    lines.append("the JVM's Java threads by name, ms of CPU per second:")
    lines += [f"  {v:7.2f}  {name}" for (name,), v in rows(before[1], after[1], 25)]
    return "\n".join(lines)


def jit_seconds(spark) -> float:
    """The JVM's JIT compilers' total time so far (their threads' time compiling)."""
    bean = spark._jvm.java.lang.management.ManagementFactory.getCompilationMXBean()
    return bean.getTotalCompilationTime() / 1000


def codegen_compiled(spark) -> tuple[int, int]:
    """Spark's generated classes compiled so far (each a miss of its code cache, a new
    class for the JIT to compile again) and the classes the JVM has loaded."""
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
    loading = spark._jvm.java.lang.management.ManagementFactory.getClassLoadingMXBean()
    return (
        int(metrics.METRIC_COMPILATION_TIME().getCount()),
        int(loading.getTotalLoadedClassCount()),
    )


PHASES = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


def had_input(progress) -> bool:
    """Whether a batch's progress shows input: Spark's numInputRows, or its sources'
    offsets moved. A Kafka table's landing path reads the batch's records in its own
    tasks, the source's scan never runs and Spark counts no rows for it."""
    return progress.numInputRows > 0 or any(s.startOffset != s.endOffset for s in progress.sources)


def batch_breakdown(spark) -> str:
    """Per running query: its recent batches with rows, and the mean milliseconds of each
    phase of Spark's progress (`durationMs`) over them; addBatch is the foreachBatch
    writer (parse, checks, Delta commit, publish)."""
    lines = [
        "\nmean ms per batch with rows, recent batches: "
        f"query batches {' '.join(PHASES)} total; Spark jobs per batch with rows"
    ]
    tracker = spark.sparkContext.statusTracker()
    for q in sorted(spark.streams.active, key=lambda q: q.name or ""):
        with_rows = [p for p in q.recentProgress if had_input(p)]
        if not with_rows:
            lines.append(f"{q.name}: no batch with rows")
            continue
        mean = {k: statistics.mean(p.durationMs.get(k, 0) for p in with_rows) for k in PHASES}
        total = statistics.mean(p.durationMs.get("triggerExecution", 0) for p in with_rows)
        lines.append(
            f"{q.name} {len(with_rows)} "
            + " ".join(f"{mean[k]:.0f}" for k in PHASES)
            + f" {total:.0f}; {jobs_per_batch(tracker, q):.1f}"
        )
    return "\n".join(lines)


def job_kinds(spark) -> str:
    """Per running query: what its Spark jobs were, by the name Spark gives a job's last
    stage (the action and where it was called), with how many there were per batch with
    rows, and the CPU (Spark's `executorCpuTime`) their tasks used per such batch. This
    is what a cut of jobs per batch aims at."""
    tracker = spark.sparkContext.statusTracker()
    task_cpu = stage_task_cpu(spark)
    lines = [
        "\nSpark jobs per batch with rows, by kind (the job's last stage), and the CPU of "
        "their tasks per batch with rows (the rest of a batch's CPU is the driver's):"
    ]
    for q in sorted(spark.streams.active, key=lambda q: q.name or ""):
        batches = sum(1 for p in q.recentProgress if had_input(p))
        if not batches:
            continue
        kinds: dict[str, int] = {}
        cpu = 0.0
        for job in tracker.getJobIdsForGroup(str(q.runId)):
            info = tracker.getJobInfo(job)
            stage = info and max(info.stageIds, default=None)
            stage_info = tracker.getStageInfo(stage) if stage is not None else None
            name = stage_info.name if stage_info else "(forgotten)"
            kinds[name] = kinds.get(name, 0) + 1
            cpu += sum(task_cpu.get(s, 0.0) for s in (info.stageIds if info else ()))
        lines.append(f"{q.name}: tasks {cpu / batches * 1000:.0f} ms CPU per batch")
        for name, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {n / batches:5.1f}  {name}")
    return "\n".join(lines)


def java_thread_cpu(spark) -> dict[int, tuple[str, float]]:
    """Every live Java thread of the JVM by id: its name and its CPU seconds so far."""
    bean = spark._jvm.java.lang.management.ManagementFactory.getThreadMXBean()
    threads = {}
    for tid in bean.getAllThreadIds():
        info = bean.getThreadInfo(tid)
        if info is not None:
            threads[tid] = (info.getThreadName(), bean.getThreadCpuTime(tid) / 1e9)
    return threads


STREAM_THREAD = "stream execution thread for "
"""How Spark names a streaming query's own thread (then the query's name)."""


def thread_cpu(spark) -> tuple[dict, dict, dict]:
    """A reading for `thread_split`: the JVM's threads from /proc by group (which has the
    JIT's and the GC's, not Java threads), by Java thread (whose full names tell the
    queries apart), and the time every kind of process has waited for a core."""
    jvms = [pid for pid, (kind, _) in processes().items() if kind == "jvm"]
    return jvm_threads(jvms), java_thread_cpu(spark), waits_by_kind()


def thread_split(spark, before: tuple[dict, dict, dict], since: dt.datetime) -> str:
    """The JVM's CPU from `before` (a `thread_cpu` reading taken at `since`) to now, by
    group of threads, with the time each group's threads and each kind of process
    waited for a core, and each query's own thread per batch with rows since then."""
    procs, java, kinds = thread_cpu(spark)
    groups: dict[str, float] = {}
    waits: dict[str, float] = {}
    for key, (group, cpu, wait) in procs.items():
        _, cpu0, wait0 = before[0].get(key, (group, 0.0, 0.0))
        groups[group] = groups.get(group, 0.0) + cpu - cpu0
        waits[group] = waits.get(group, 0.0) + wait - wait0
    batches = {
        q.name: sum(
            1
            for p in q.recentProgress
            if had_input(p) and dt.datetime.fromisoformat(p.timestamp) >= since
        )
        for q in spark.streams.active
    }
    total = sum(groups.values())
    lines = [
        f"\nJVM CPU during the probes by thread: {total:.1f} s; "
        + ", ".join(f"{g} {c:.1f} s" for g, c in sorted(groups.items(), key=lambda kv: -kv[1])),
        "waiting for a core (run queue) meanwhile: "
        + ", ".join(
            f"{g} {waits[g]:.1f} s" for g, _ in sorted(groups.items(), key=lambda kv: -kv[1])
        )
        + "; all threads of the "
        + ", ".join(f"{k} {w - before[2].get(k, 0.0):.1f} s" for k, w in sorted(kinds.items())),
    ]
    for tid, (name, cpu) in sorted(java.items(), key=lambda kv: kv[1][0]):
        if not name.startswith(STREAM_THREAD):
            continue
        query = name[len(STREAM_THREAD) :].split(" ")[0]
        used, n = cpu - before[1].get(tid, (name, 0.0))[1], batches.get(query, 0)
        per = f", {used / n * 1000:.0f} ms per batch with rows ({n})" if n else ""
        lines.append(f"  {query}: its own thread {used:.1f} s{per}")
    return "\n".join(lines)


def stage_task_cpu(spark) -> dict[int, float]:
    """Seconds of task CPU (`executorCpuTime`) of every stage Spark still lists, by stage
    id, from its status store (the REST API's source, which the UI being off leaves)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    no_quantiles = spark.sparkContext._gateway.new_array(spark.sparkContext._jvm.double, 0)
    stages = store.stageList(None, False, False, no_quantiles, None)
    cpu: dict[int, float] = {}
    for i in range(stages.size()):
        stage = stages.apply(i)
        cpu[stage.stageId()] = cpu.get(stage.stageId(), 0.0) + stage.executorCpuTime() / 1e9
    return cpu


def jobs_per_batch(tracker, query) -> float:
    """Spark jobs of `query` (its job group is its run id) per batch that had rows, over
    the batches Spark still lists (an idle batch runs no job)."""
    jobs = len(tracker.getJobIdsForGroup(str(query.runId)))
    batches = sum(1 for p in query.recentProgress if had_input(p))
    return jobs / batches if batches else float("nan")


def report_cpu(queries: int, idle: Cpu, busy: Cpu) -> None:
    """CPU per idle query, and per small batch while the probes ran."""

    def fmt(cpu: dict[str, float], wall: float) -> str:
        total = sum(cpu.values())
        parts = ", ".join(f"{k} {v / wall:.3f}" for k, v in sorted(cpu.items()))
        return f"{total / wall:.3f} CPU s/s ({parts})"

    (icpu, ibatches, iwall), (bcpu, bbatches, bwall) = idle, busy
    # The benchmark's watchers (a process of their own) are not the queries' CPU.
    bcpu = dict(bcpu)
    watchers = bcpu.pop("watchers", 0.0)
    idle_rate = sum(icpu.values()) / iwall
    print(
        f"\nidle, {queries} queries, {iwall:.0f}s, {ibatches} batches: {fmt(icpu, iwall)}; "
        f"per idle query {idle_rate / queries * 1000:.2f} ms CPU per second"
    )
    extra = sum(bcpu.values()) - idle_rate * bwall
    per_batch = f"{extra / bbatches * 1000:.0f} ms" if bbatches else "-"
    print(
        f"probes, {bwall:.0f}s, {bbatches} batches ({bbatches / bwall:.2f}/s): {fmt(bcpu, bwall)}; "
        f"CPU per small batch above idle: {per_batch}; the benchmark's watchers "
        f"{watchers / bwall:.3f} CPU s/s, not counted"
    )


def report(
    sent: dict[int, float],
    table_seen: dict[int, float],
    topic_seen: dict[int, float],
    args: argparse.Namespace,
) -> tuple[str, str]:
    """Prints the figures; returns `p50 / p99` of the table and of the topic."""
    out = []
    print(
        f"\nprobes: {len(sent)} (one every {args.probe_every:g}s), background {args.rate:g} events/s, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    for name, seen in (("ADS Delta table", table_seen), ("published topic", topic_seen)):
        lat = [seen[n] - sent[n] for n in sent if n in seen]
        missing = len(sent) - len(lat)
        if not lat:
            print(f"{name}: no probe seen")
            out.append("-")
            continue
        out.append(f"{percentile(lat, 0.5):.1f}s / {percentile(lat, 0.99):.1f}s")
        print(
            f"{name}: p50 {percentile(lat, 0.5):.1f}s  p99 {percentile(lat, 0.99):.1f}s  "
            f"min {min(lat):.1f}s  max {max(lat):.1f}s  mean {statistics.mean(lat):.1f}s"
            + (f"  ({missing} probe(s) never seen)" if missing else "")
        )
    return out[0], out[1]


if __name__ == "__main__":
    sys.exit(main())
