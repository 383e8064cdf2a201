"""CPU seconds of a process tree, by process and by kind, read from Linux /proc (for the
benchmarks).

`processes(root)` gives `{pid: (kind, cpu seconds)}` for `root` and every process under
it; kind is "driver" (`root` itself), "jvm" (Spark's JVM), "broker" (the bundled broker),
"watchers" (the latency benchmark's watchers) or "python workers" (Spark's Python workers
and anything else). `cpu_by_kind(root)` sums
it by kind. Take a reading before and after a phase; the difference is what the phase
cost. CPU per unit of work moves much less with the machine's load than wall time does.
`jvm_threads(pids)` reads the JVMs' threads the same way, grouped by what they do, with
the time each has waited for a core (`run_queue_wait`); `waits_by_kind(root)` sums those
waits over every thread of each kind of process.
"""

from __future__ import annotations

import os

_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_stat(path: str) -> tuple[str, list[str]]:
    """(name, fields after the name) of a /proc `stat` file; OSError when it is gone."""
    with open(path) as f:
        stat = f.read()
    return stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()


def stat_cpu(fields: list[str]) -> float:
    """User + system CPU seconds from the fields of `proc_stat`."""
    return (int(fields[11]) + int(fields[12])) / _HZ


def processes(
    root: int | None = None, *, without_thread: int | None = None
) -> dict[int, tuple[str, float]]:
    """{pid: (kind, cpu seconds)} for `root` (default: this process) and every process
    under it; `without_thread`: a thread of `root` whose CPU is not counted (the thread
    that measures: its walk of /proc is the benchmark's, not the measured work's)."""
    root = os.getpid() if root is None else root
    procs: dict[int, tuple[int, float, str]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            comm, fields = proc_stat(f"/proc/{d}/stat")
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited meanwhile
        if int(d) == root:
            kind = "driver"
        elif comm == "java":
            kind = "jvm"
        elif "streams.broker" in cmd:
            kind = "broker"
        elif "latency_watchers.py" in cmd:
            kind = "watchers"
        else:
            kind = "python workers"
        cpu = stat_cpu(fields)
        if int(d) == root and without_thread is not None:
            try:
                cpu -= stat_cpu(proc_stat(f"/proc/{d}/task/{without_thread}/stat")[1])
            except OSError:
                pass  # no such thread: nothing to take off
        procs[int(d)] = (int(fields[1]), cpu, kind)
    out: dict[int, tuple[str, float]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            out[pid] = (procs[pid][2], procs[pid][1])
        todo += [p for p, (ppid, _, _) in procs.items() if ppid == pid]
    return out


def run_queue_wait(pid: int, tid: int | None = None) -> float:
    """Seconds the thread (default: the process's main thread) has been runnable and
    waiting for a core, from its `schedstat` (the second field, in nanoseconds); 0.0
    when the file is gone or the kernel keeps no scheduler statistics."""
    path = f"/proc/{pid}/task/{tid}/schedstat" if tid is not None else f"/proc/{pid}/schedstat"
    try:
        with open(path) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def waits_by_kind(root: int | None = None) -> dict[str, float]:
    """{kind: seconds its processes' threads have waited for a core so far}, over `root`
    (default: this process) and its descendants, as `cpu_by_kind` counts CPU."""
    out: dict[str, float] = {}
    for pid, (kind, _cpu) in processes(root).items():
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        out[kind] = out.get(kind, 0.0) + sum(run_queue_wait(pid, int(t)) for t in tids)
    return out


class KindCpu(dict[str, float]):
    """{kind: CPU seconds so far}, with the reading by process it sums (`by_pid`)."""

    def __init__(self, by_pid: dict[int, tuple[str, float]]) -> None:
        super().__init__()
        self.by_pid = by_pid
        for kind, cpu in by_pid.values():
            self[kind] = self.get(kind, 0.0) + cpu


def cpu_by_kind(root: int | None = None, *, without_thread: int | None = None) -> KindCpu:
    """{kind: CPU seconds so far} over `root` (default: this process) and its descendants
    (`without_thread`: as `processes` says)."""
    return KindCpu(processes(root, without_thread=without_thread))


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds by kind between two `cpu_by_kind` readings. Counted by process: one
    that started between them counts from zero, one that exited between them is not
    counted (summed by kind, an exited process took its whole CPU off its kind: Spark
    ends Python workers that were idle for a minute)."""
    if isinstance(before, KindCpu) and isinstance(after, KindCpu):
        out = dict.fromkeys(after, 0.0)
        for pid, (kind, cpu) in after.by_pid.items():
            _, cpu0 = before.by_pid.get(pid, (kind, 0.0))
            out[kind] += max(0.0, cpu - cpu0)
        return out
    return {k: max(0.0, after.get(k, 0.0) - before.get(k, 0.0)) for k in after}


THREAD_GROUPS = (
    ("Executor task", "tasks"),
    ("GC Thread", "gc"),
    ("G1 ", "gc"),
    ("C1 Compiler", "jit"),
    ("C2 Compiler", "jit"),
    ("stream execut", "query thread"),
)
"""(prefix of a thread's name as /proc has it, 15 characters at most; its group)."""


def jvm_threads(pids: list[int]) -> dict[tuple[int, int], tuple[str, float, float]]:
    """{(pid, tid): (group, cpu seconds, seconds waited for a core)} of the JVMs' threads,
    grouped by name: Spark's tasks, the GC, the JIT's compilers, the streaming queries'
    own threads, other."""
    out: dict[tuple[int, int], tuple[str, float, float]] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                name, fields = proc_stat(f"/proc/{pid}/task/{tid}/stat")
            except OSError:
                continue
            group = next((g for prefix, g in THREAD_GROUPS if name.startswith(prefix)), "other")
            out[(pid, int(tid))] = (group, stat_cpu(fields), run_queue_wait(pid, int(tid)))
    return out
