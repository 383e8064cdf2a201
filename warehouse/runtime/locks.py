"""One process at a time per table: a lock beside each checkpoint.

Two processes running the same table both start their queries on its checkpoint;
Spark notices only when both plan the same batch, and then fails one of them with
CONCURRENT_STREAM_LOG_UPDATE, which may be the long-running one. `warehouse reset` or
`recover` under a running query would delete or replace the checkpoint it is writing.
So `warehouse run` (`Pipeline.run`), `reset` and `recover` hold
`<root>/checkpoints/<table>.lock` while they work on a table, and a second process
asking for a table in use is refused at once, naming the process that has it.

On a local disk the lock is an exclusive `flock`: the kernel drops it when its process
ends, however it ends (a `kill -9`, a crash), so no stale lock is left to clean up. The
file stays (removing it would let two processes lock two different files of the same
name); it holds the holder's pid, host, command and start while held, for the refusal's
message. On a file system without `flock` support the table runs unlocked, with a
warning.

On object storage (a root such as `s3a://bucket/wh`) it is a lease
(`streams.storage.Lease`): the next generation of `<checkpoint>.lock/` created with a
conditional put and renewed while held. A holder that dies stops renewing, and its
lease expires after `storage.lease_seconds` (60 s by default): until then the table is
refused as in use, naming the holder and when it last renewed. A holder whose lease is
taken over (it stalled for longer than that) is told through `on_lost`; a run then
stops its queries and fails (`TableBusyError`). A store that cannot write
conditionally leaves the table unlocked, with a warning, as a file system without
`flock` does.

Concurrency: `holding` may be called from any thread. Within one process it is
re-entrant per table (the CLI holds the tables before it starts Spark, and the
`Pipeline` it runs holds them again), so two threads of one process are not kept
apart: Spark refuses two queries on one checkpoint in a session itself.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

import streams.storage as storage
from warehouse.runtime.errors import RuntimeConfigError, TableBusyError
from warehouse.spec.paths import lock_file

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)

Doing = Literal["run", "reset", "recover", "vacuum"]


@dataclass
class _Held:
    file: IO[str] | None
    """None where the file system cannot lock: the table runs unlocked."""
    count: int
    lease: storage.Lease | None = None
    watchers: list[Callable[[Exception], None]] = field(default_factory=list)

    def lost(self, error: Exception) -> None:
        for watch in list(self.watchers):
            watch(error)


_held: dict[str, _Held] = {}
_guard = threading.Lock()


def _command() -> str:
    """How this process was started, as a user would recognise it."""
    args = list(sys.argv)
    first = Path(args[0]) if args else Path()
    if first.name == "warehouse" or (
        first.name == "__main__.py" and first.parent.name == "warehouse"
    ):
        return " ".join(["warehouse", *args[1:]])
    return " ".join([Path(sys.executable).name, *args]).strip()


def this_process() -> dict[str, object]:
    """This process as a lock's holder and a run's state name it: pid, host, command."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "command": _command()}


def _record(doing: Doing) -> dict[str, object]:
    return {
        **this_process(),
        "doing": doing,
        "since": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _acquire(location: str, doing: Doing) -> _Held | str:
    """Lock `location`: what is held, or the holder's description when another process
    has it."""
    if not storage.is_local(location):
        return _lease(location, doing)
    path = Path(storage.local_path(location) or location)
    path.parent.mkdir(parents=True, exist_ok=True)
    f = path.open("a+", encoding="utf-8")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read()
        f.close()
        return _describe(holder)
    except OSError as e:
        f.close()
        if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
        logger.warning(
            "cannot lock %s (%s): the file system does not support it, so another process "
            "could work on this table at the same time",
            path,
            e.strerror,
        )
        return _Held(None, 1)
    f.seek(0)
    f.truncate()
    f.write(json.dumps(_record(doing)))
    f.flush()
    return _Held(f, 1)


def _lease(location: str, doing: Doing) -> _Held | str:
    """Take the lease at `location` (object storage): what is held, or the holder's
    description."""
    held = _Held(None, 1)
    lease = storage.Lease(location, _record(doing), on_lost=held.lost)
    try:
        holder = lease.acquire()
    except storage.LeaseUnsupportedError as e:
        logger.warning("%s Another process could work on this table at the same time.", e)
        return held
    except storage.StorageError as e:
        raise RuntimeConfigError(str(e)) from e
    if holder is not None:
        ago = holder.get("renewed_seconds_ago")
        return _describe(json.dumps(holder)) + (
            f"; its lease was renewed {ago:g} s ago and expires {lease.seconds:g} s after "
            "its last renewal if its holder is gone"
            if isinstance(ago, int | float)
            else ""
        )
    held.lease = lease
    return held


def _describe(holder: str) -> str:
    """The lock file's record of its holder, for a message; what is there if not a record
    (a holder caught between locking and writing)."""
    try:
        h = json.loads(holder)
        return f"pid {h['pid']} on {h['host']} (`{h['command']}`, {h['doing']} since {h['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"


def _release(path: str, watch: Callable[[Exception], None] | None = None) -> None:
    with _guard:
        held = _held[path]
        if watch is not None and watch in held.watchers:
            held.watchers.remove(watch)
        held.count -= 1
        if held.count:
            return
        del _held[path]
    if held.lease is not None:
        held.lease.release()
    if held.file is not None:
        held.file.seek(0)
        held.file.truncate()
        fcntl.flock(held.file.fileno(), fcntl.LOCK_UN)
        held.file.close()


@contextmanager
def holding(
    project: LoadedProject,
    names: Iterable[str],
    *,
    doing: Doing,
    on_lost: Callable[[Exception], None] | None = None,
) -> Iterator[None]:
    """Hold the lock of each table in `names` for the block; raises `TableBusyError`
    naming every table another process holds (and holds none of them) if any is.
    `on_lost` is called (from the lease's thread) when a lease on object storage is lost
    while held."""
    names = list(dict.fromkeys(names))
    taken: list[str] = []
    busy: dict[str, str] = {}
    with _guard:
        for name in names:
            path = lock_file(project.checkpoint_path(name))
            if path not in _held:
                got = _acquire(path, doing)
                if isinstance(got, str):
                    busy[name] = got
                    continue
                _held[path] = got
                got.count = 0
            _held[path].count += 1
            if on_lost is not None:
                _held[path].watchers.append(on_lost)
            taken.append(path)
    if busy:
        for path in taken:
            _release(path, on_lost)
        raise _busy_error(project, busy, doing)
    try:
        yield
    finally:
        for path in taken:
            _release(path, on_lost)


def _busy_error(project: LoadedProject, busy: dict[str, str], doing: Doing) -> TableBusyError:
    tables = ", ".join(f"`{n}` ({project.tables[n].path})" for n in busy)
    holders = sorted(set(busy.values()))
    by = holders[0] if len(holders) == 1 else "; ".join(f"`{n}`: {h}" for n, h in busy.items())
    what = {
        "run": "A table runs in one process at a time: two would write its checkpoint at "
        "once, and Spark would fail one of them at the first batch they share",
        "reset": "Reset deletes the table and the checkpoint that process writes",
        "recover": "Recover replaces the checkpoint that process writes",
        "vacuum": "Vacuum would delete files a running batch has written and not yet committed",
    }[doing]
    one = len(busy) == 1
    return TableBusyError(
        f"{'Table' if one else 'Tables'} {tables} {'is' if one else 'are'} in use by "
        f"another process: {by}. {what}. Stop that process first (Ctrl-C or SIGTERM stops "
        "a run at a batch boundary)"
        + (", or leave these tables out (`--table`, `--layer`)." if doing == "run" else "."),
        table=next(iter(busy)),
    )
