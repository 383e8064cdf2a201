"""Where the streaming queries' own threads spend their time, by sampling their Java
stacks (`jcmd <pid> Thread.print`) while a benchmark runs (for the benchmarks).

`StackSampler(pid, every=0.5)` is a thread: `start()` it, `stop()` it, then `report()`
gives, per query (its `stream execution thread for warehouse_<table>`), the share of
its busy samples in each phase of a batch (`PHASES`: the first that a stack holds,
innermost first) and its most frequent innermost frames that are not the JDK's, Scala's or py4j's. A sample whose innermost
frames wait for the Python side of a `foreachBatch` call (py4j's callback socket) is
"python"; one parked between triggers is idle and not counted.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections import Counter

STREAM_THREAD = re.compile(r'^"stream execution thread for (\S+)')
FRAME = re.compile(r"^\s+at ([\w$.<>/]+)\(")

PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("code generation", ("codegen.CodeGenerator", "janino")),
    (
        "delta log and snapshots",
        (
            "sql.delta.DeltaLog",
            "sql.delta.Snapshot",
            "SnapshotManagement",
            "delta.stats",
            "delta.files",
            "delta.storage",
            "OptimisticTransaction",
            "delta.commands",
            "delta.sources",
        ),
    ),
    (
        "analysis",
        (
            "catalyst.analysis.Analyzer",
            "CheckAnalysis",
            "QueryExecution.assertAnalyzed",
            "QueryExecution.analyzed",
        ),
    ),
    (
        "optimisation",
        ("catalyst.optimizer", "QueryExecution.optimizedPlan", "QueryExecution.withCachedData"),
    ),
    (
        "physical planning",
        (
            "QueryExecution.sparkPlan",
            "QueryExecution.executedPlan",
            "SparkStrategies",
            "QueryPlanner",
            "AdaptiveSparkPlanExec",
            "prepareForExecution",
        ),
    ),
    ("running jobs", ("DAGScheduler.runJob", "SparkContext.runJob", "awaitResult")),
    (
        "python",
        (
            "py4j.CallbackConnection",
            "py4j.ClientServerConnection.sendCommand",
            "PythonForeachBatch",
            "python.PythonRunner",
        ),
    ),
)
"""A batch's phases by the frames that mark them. The first phase with a frame on the
stack, in this order, is the sample's: code generation inside planning is code
generation, a Delta log read inside analysis is the log's."""

IDLE = ("Object.wait", "Unsafe.park", "Thread.sleep", "awaitNanos", "LockSupport.park")


def parse_dump(text: str) -> dict[str, list[list[str]]]:
    """{query name: [its threads' frames, innermost first]} of one `Thread.print`."""
    out: dict[str, list[list[str]]] = {}
    frames: list[str] | None = None
    for line in text.splitlines():
        m = STREAM_THREAD.match(line)
        if m:
            frames = []
            out.setdefault(m.group(1), []).append(frames)
            continue
        if line.startswith('"'):
            frames = None
            continue
        if frames is not None:
            f = FRAME.match(line)
            if f:
                frames.append(f.group(1))
    return out


def phase(frames: list[str]) -> str | None:
    """The batch phase of one stack (None: idle between triggers)."""
    if not frames:
        return None
    top = frames[0]
    if any(mark in top for mark in IDLE) and not any(
        "CallbackConnection" in f or "ClientServerConnection" in f for f in frames[:12]
    ):
        # Parked: between triggers, or a batch waiting for its turn (the gate).
        waiting_turn = any("PythonForeachBatch" in f for f in frames)
        return "waiting (gate, lock or Python)" if waiting_turn else None
    for name, marks in PHASES:
        if any(mark in f for f in frames for mark in marks):
            return name
    return "other"


PLUMBING = ("java.", "jdk.", "sun.", "scala.", "py4j.", "com.sun.", "$Proxy")


def leaf(frames: list[str], depth: int = 3) -> str:
    """The innermost `depth` frames of a stack that are not the JDK's, Scala's or py4j's
    plumbing (the innermost frame itself when every frame is)."""
    ours = [f for f in frames if not f.startswith(PLUMBING) and "$$Lambda" not in f]
    return " < ".join(ours[:depth]) if ours else frames[0]


class StackSampler(threading.Thread):
    """Samples the stream execution threads of JVM `pid` every `every` seconds.

    Concurrency: its own thread writes the counters; read them after `stop()`."""

    def __init__(self, pid: int, *, every: float = 0.5, jcmd: str = "jcmd") -> None:
        super().__init__(daemon=True, name="stack-sampler")
        self.pid, self.every, self.jcmd = pid, every, jcmd
        self.phases: dict[str, Counter[str]] = {}
        self.methods: dict[str, Counter[str]] = {}
        self.samples = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.every):
            done = subprocess.run(
                [self.jcmd, str(self.pid), "Thread.print"],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                continue
            self.samples += 1
            for query, stacks in parse_dump(done.stdout).items():
                for frames in stacks:
                    p = phase(frames)
                    if p is None:
                        continue
                    self.phases.setdefault(query, Counter())[p] += 1
                    self.methods.setdefault(query, Counter())[f"{p}: {leaf(frames)}"] += 1

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=30)

    def report(self, *, top: int = 12) -> str:
        lines = [
            f"\nstream threads' stacks, {self.samples} samples every {self.every:g}s: "
            "share of busy samples by phase; the most frequent innermost frames (not the JDK's, "
            "Scala's or py4j's) by phase"
        ]
        for query in sorted(self.phases):
            counts = self.phases[query]
            busy = sum(counts.values())
            lines.append(
                f"{query}: {busy} busy samples; "
                + ", ".join(f"{p} {n / busy:.0%}" for p, n in counts.most_common())
            )
            for method, n in self.methods[query].most_common(top):
                lines.append(f"  {n / busy:4.0%}  {method}")
        return "\n".join(lines)
