"""Where a JVM's Java threads spend their CPU, from a Java Flight Recorder recording taken
while a benchmark runs (for the benchmarks).

`JfrProfile(pid)`: `start()` a recording of the running JVM (`jcmd <pid> JFR.start` with
`cpu_samples.jfc`: a CPU sample of every thread running Java code every 10 ms, and no
other event; a thread that waits, on a socket or a lock, is not sampled), `stop()` it,
then `report()` gives each kind of work's share of the samples, across the JVM and per
group of threads (the queries' own threads, Spark's tasks, the DAG scheduler, ...). The
recording stays in a temporary folder for `jfr print` (its path is in the report).

A sample's kind is the first of `KINDS` that one of its frames names, innermost frame
first: a sample inside the Hadoop configuration's serialization, itself inside a task's
deserialization, is the configuration's. What JFR does not sample (the JIT's compiler
threads, the GC, native code such as the Python workers' sockets) is not here; the
benchmark's `--threads` gives those from /proc. `jcmd` samples threads at safepoints
(`stack_samples.py`); JFR does not, so a frame's share here is its share of CPU.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections import Counter, defaultdict

KINDS: tuple[tuple[str, str], ...] = (
    (
        "Hadoop configuration (new, copied, serialized)",
        r"org/apache/hadoop/conf/Configuration\.|WritableUtils\.|SerializableConfiguration",
    ),
    ("code generation", r"codegen/CodeGenerator|org/codehaus/janino|CodegenContext"),
    ("explain strings", r"ExplainUtils|\.treeString$|\.simpleString$|generateTreeString"),
    ("Java serialization", r"java/io/ObjectOutputStream|JavaSerializerInstance\.serialize"),
    ("Java deserialization", r"java/io/ObjectInputStream|JavaSerializerInstance\.deserialize"),
    ("state stores", r"execution/streaming/state/"),
    (
        "analysis",
        r"catalyst/analysis/|QueryExecution\.(analyzed|assertAnalyzed)$|CheckAnalysis",
    ),
    ("optimisation", r"catalyst/optimizer/|QueryExecution\.(optimizedPlan|withCachedData)$"),
    (
        "physical planning",
        r"SparkStrategies|QueryPlanner|QueryExecution\.(sparkPlan|executedPlan)$"
        r"|prepareForExecution|EnsureRequirements",
    ),
    ("listeners and the status store", r"scheduler/LiveListenerBus|AppStatusListener|kvstore"),
    ("task scheduling", r"scheduler/(DAGScheduler|TaskSetManager|TaskSchedulerImpl)"),
    ("Python workers' sockets and Arrow", r"spark/api/python/|PythonRunner|spark/sql/.*[Aa]rrow"),
    ("files (Hadoop, java.io, nio)", r"org/apache/hadoop/fs/|java/io/File|sun/nio/fs/"),
    ("running the tasks' operators", r"GeneratedClass|BufferedRowIterator|executor/Executor"),
    ("py4j (the Python driver's calls)", r"^py4j/"),
)
"""(kind, a regular expression over `package/Class.method` frame names); first match wins."""

SETTINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_samples.jfc")
"""The recording's settings: CPU samples every 10 ms, no other event."""

_KINDS = tuple((name, re.compile(pattern)) for name, pattern in KINDS)


def thread_group(name: str) -> str:
    """A Java thread's group: the queries' own threads, Spark's tasks, or its name
    without numbers."""
    if name.startswith("stream execution thread for "):
        return "the queries' own threads"
    if name.startswith("Executor task "):
        return "Spark's tasks"
    return re.sub(r"\d+", "N", name)


def kind(frames: list[str]) -> str:
    """The kind of work of one sample's stack, innermost frame first."""
    for frame in frames:
        for name, pattern in _KINDS:
            if pattern.search(frame):
                return name
    return "other"


class JfrProfile:
    """One recording of JVM `pid`. Not thread-safe: `start`, `stop` and `report` are
    called in that order by one thread."""

    def __init__(self, pid: int, *, java_home: str | None = None) -> None:
        self.pid = pid
        bin_dir = os.path.join(java_home, "bin") if java_home else ""
        self.jcmd, self.jfr = os.path.join(bin_dir, "jcmd"), os.path.join(bin_dir, "jfr")
        self.dir = tempfile.mkdtemp(prefix="jfr-profile-")
        self.file = os.path.join(self.dir, "probes.jfr")
        self.name = f"warehouse-bench-{os.getpid()}"

    def _jcmd(self, *args: str) -> None:
        subprocess.run(
            [self.jcmd, str(self.pid), *args], check=True, capture_output=True, timeout=60
        )

    def start(self) -> None:
        self._jcmd("JFR.start", f"name={self.name}", f"settings={SETTINGS}")

    def stop(self) -> None:
        self._jcmd("JFR.stop", f"name={self.name}", f"filename={self.file}")

    def samples(self) -> list[tuple[str, list[str]]]:
        """Every CPU sample of the recording: its thread's name and its frames
        (`package/Class.method`), innermost first."""
        out = subprocess.run(
            [self.jfr, "print", "--json", "--stack-depth", "512"]
            + ["--events", "jdk.ExecutionSample", self.file],
            check=True,
            capture_output=True,
            timeout=600,
        ).stdout
        samples = []
        for event in json.loads(out)["recording"]["events"]:
            values = event["values"]
            thread = values["sampledThread"]
            frames = [
                f"{f['method']['type']['name']}.{f['method']['name']}"
                for f in values["stackTrace"]["frames"]
            ]
            samples.append((thread["javaName"] or thread["osName"] or "", frames))
        return samples

    def report(self) -> str:
        samples = self.samples()
        if not samples:
            return f"\nJFR: no CPU samples of Java threads in {self.file}"
        kinds: Counter[str] = Counter()
        groups: defaultdict[str, Counter[str]] = defaultdict(Counter)
        for thread, frames in samples:
            k = kind(frames)
            kinds[k] += 1
            groups[thread_group(thread)][k] += 1
        total = len(samples)
        lines = [
            f"\nJFR CPU samples of the JVM's Java threads during the probes: {total} (the "
            f"recording is kept: {self.file}), by kind of work (the innermost frame that "
            "names one):"
        ]
        lines += [f"  {100 * n / total:5.1f} %  {k}" for k, n in kinds.most_common()]
        lines.append("by group of threads (share of all samples; its kinds, most first):")
        for group, counts in sorted(groups.items(), key=lambda kv: -kv[1].total())[:6]:
            top = ", ".join(f"{k} {100 * n / total:.1f}" for k, n in counts.most_common(5))
            lines.append(f"  {100 * counts.total() / total:5.1f} %  {group}: {top}")
        return "\n".join(lines)
