"""The executor JVMs of an application on the test cluster, found from /proc.

Imported by the crash test (which SIGKILLs one) and by the class archives' warm-up
application (whose executor writes an archive), which runs as a separate Python process
and so imports nothing but the standard library from here.
"""

from __future__ import annotations

from pathlib import Path

EXECUTOR = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def executor_pids(app_id: str) -> list[int]:
    """The pids of the executor JVMs of application `app_id` (the workers launch them with
    `--app-id <id>`)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        words = [a.decode(errors="replace") for a in args]
        if EXECUTOR in words and "--app-id" in words:
            at = words.index("--app-id")
            if at + 1 < len(words) and words[at + 1] == app_id:
                pids.append(int(proc.name))
    return pids
