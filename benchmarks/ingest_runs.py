"""What the ingest benchmarks share (`kafka_ingest_bench.py`, `kafka_ingest_sizes.py`):
CPU by kind of process, kcat's read of a topic, the session, a listener of the batches'
addBatch times, and the `engines:` line of a run's project."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator

from proc_cpu import jvm_threads
from proc_cpu import processes as cpu_by_process


class BatchTimes:
    """The addBatch time of the batches a query reports, summed (the runner's result has
    no batch time). A Py4J listener that takes each progress event as its JSON, in one
    call: PySpark's `StreamingQueryListener` converts every event field by field through
    Py4J, whose lookups of names cost the JVM ~0.1 s of CPU per batch, which the
    measurement would count as the framework's. Events arrive asynchronously: `wait`."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def onQueryStarted(self, event) -> None:  # the Java interface's names
        pass

    def onQueryProgress(self, event) -> None:
        progress = json.loads(event.progress().json())
        self.seconds.append(progress["durationMs"].get("addBatch", 0) / 1000)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass

    def wait(self, batches: int, timeout: float = 10.0) -> float | None:
        deadline = time.monotonic() + timeout
        while len(self.seconds) < batches and time.monotonic() < deadline:
            time.sleep(0.05)
        return sum(self.seconds) if len(self.seconds) >= batches else None

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


@contextlib.contextmanager
def batch_times(spark) -> Iterator[BatchTimes]:
    """A `BatchTimes` listening to `spark`'s queries while the block runs."""
    from pyspark import SparkContext
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = SparkContext._gateway
    ensure_callback_server_started(gateway)
    times = BatchTimes()
    wrapper = gateway.jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(times)
    spark.streams._jsqm.addListener(wrapper)
    try:
        yield times
    finally:
        spark.streams._jsqm.removeListener(wrapper)


def engines_line(engine: str) -> str:
    """The `engines:` line of a project's conf for `--engines` entry `engine`: `python` or
    `native` (both Kafka and Delta), with `/spark` for `parse: spark` (Spark's
    `from_json`, off the Arrow path)."""
    engine, _, parse = engine.partition("/")
    extra = f", parse: {parse}" if parse else ""
    return f"engines: {{kafka: {engine}, delta: {engine}{extra}}}\n"


class CpuMeter:
    """CPU seconds by kind of process between `start()` and `stop()`; with `threads`,
    the JVM's also by thread group (tasks, gc, jit, query thread, other)."""

    def __init__(self, threads: bool = False) -> None:
        self.threads = threads
        self.jvm: dict[str, float] = {}

    def _jvm_pids(self, procs: dict[int, tuple[str, float]]) -> list[int]:
        return [p for p, (kind, _) in procs.items() if kind == "jvm"]

    def start(self) -> CpuMeter:
        self._before = cpu_by_process(os.getpid())
        if self.threads:
            self._threads = jvm_threads(self._jvm_pids(self._before))
        return self

    def stop(self) -> dict[str, float]:
        after = cpu_by_process(os.getpid())
        used: dict[str, float] = {}
        for pid, (kind, cpu) in after.items():
            used[kind] = used.get(kind, 0.0) + cpu - self._before.get(pid, (kind, 0.0))[1]
        if self.threads:
            self.jvm = {}
            for key, (group, cpu, _wait) in jvm_threads(self._jvm_pids(after)).items():
                was = self._threads.get(key, (group, 0.0))[1]
                self.jvm[group] = self.jvm.get(group, 0.0) + cpu - was
        return used


def cpu_line(used: dict[str, float], records: int) -> str:
    """`cpu 12.3 s per 1M records (jvm 9.0, python workers 2.9, driver 0.4; broker 0.3)`."""
    per_m = 1_000_000 / records
    own = {k: v for k, v in used.items() if k != "broker"}
    parts = ", ".join(f"{k} {v * per_m:.1f}" for k, v in sorted(own.items()) if v * per_m >= 0.05)
    return (
        f"cpu {sum(own.values()) * per_m:.1f} s per 1M records ({parts}; "
        f"broker {used.get('broker', 0.0) * per_m:.1f})"
    )


def run_kcat(bootstrap: str, topic: str, records: int, runs: int = 1) -> float | None:
    """(k): kcat (librdkafka in C) reading the whole topic, `kcat -C -e -o beginning`, every
    message printed to /dev/null; its seconds (the fastest of `runs`), or None when kcat
    is not installed."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        print("(k) kcat not installed: no C-consumer baseline", flush=True)
        return None
    cmd = [kcat, "-C", "-e", "-q", "-o", "beginning", "-b", bootstrap, "-t", topic]
    cmd += ["-X", "fetch.max.bytes=67108864", "-f", "%s\\n"]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            subprocess.run(cmd, stdout=sink, check=True)
        times.append(time.perf_counter() - t0)
    dt = min(times)
    runs_text = f" (fastest of {runs})" if runs > 1 else ""
    print(f"(k) kcat -C -e: {records / dt:>10,.0f} rows/s{runs_text}", flush=True)
    return dt


def spark_session():
    from bench_session import local_session

    return local_session("kafka-ingest-bench")
