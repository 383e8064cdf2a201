"""CPU seconds of a process tree by kind, read from Linux /proc (for the benchmarks).

`cpu_by_kind(root)` sums user + system CPU of `root` and every process under it:
"driver" (`root` itself), "jvm" (Spark's JVM), "broker" (the bundled broker) and
"python workers" (Spark's Python workers and anything else). Take it before and after
a phase; the difference is what the phase cost. CPU per unit of work moves much less
with the machine's load than wall time does.
"""

from __future__ import annotations

import os

_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: str) -> tuple[str, list[str]]:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()


def cpu_by_kind(root: int | None = None) -> dict[str, float]:
    """{kind: CPU seconds so far} over `root` (default: this process) and its descendants."""
    root = os.getpid() if root is None else root
    procs: dict[int, tuple[int, float, str]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            comm, fields = _stat(d)
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
        else:
            kind = "python workers"
        procs[int(d)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _HZ, kind)
    out: dict[str, float] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            _, cpu, kind = procs[pid]
            out[kind] = out.get(kind, 0.0) + cpu
        todo += [p for p, (ppid, _, _) in procs.items() if ppid == pid]
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds by kind between two `cpu_by_kind` readings (processes that exited
    between them are not counted)."""
    return {k: max(0.0, after.get(k, 0.0) - before.get(k, 0.0)) for k in after}
