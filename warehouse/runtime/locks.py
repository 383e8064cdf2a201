"""One process at a time per table: a lock file beside each checkpoint.

Two processes running the same table both start their queries on its checkpoint;
Spark notices only when both plan the same batch, and then fails one of them with
CONCURRENT_STREAM_LOG_UPDATE, which may be the long-running one. `warehouse reset` or
`recover` under a running query would delete or replace the checkpoint it is writing.
So `warehouse run` (`Pipeline.run`), `reset` and `recover` hold
`<root>/checkpoints/<table>.lock` while they work on a table, and a second process
asking for a table in use is refused at once, naming the process that has it.

The lock is an exclusive `flock`: the kernel drops it when its process ends, however
it ends (a `kill -9`, a crash), so no stale lock is left to clean up. The file stays
(removing it would let two processes lock two different files of the same name); it
holds the holder's pid, host, command and start while held, for the refusal's message.
On a file system without `flock` support the table runs unlocked, with a warning.

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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from warehouse.runtime.errors import TableBusyError
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


_held: dict[Path, _Held] = {}
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


def _acquire(path: Path, doing: Doing) -> _Held | str:
    """Lock `path`: the handle held, or the holder's description when another process has it."""
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
    since = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    f.write(
        json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "command": _command(),
                "doing": doing,
                "since": since,
            }
        )
    )
    f.flush()
    return _Held(f, 1)


def _describe(holder: str) -> str:
    """The lock file's record of its holder, for a message; what is there if not a record
    (a holder caught between locking and writing)."""
    try:
        h = json.loads(holder)
        return f"pid {h['pid']} on {h['host']} (`{h['command']}`, {h['doing']} since {h['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"


def _release(path: Path) -> None:
    with _guard:
        held = _held[path]
        held.count -= 1
        if held.count:
            return
        del _held[path]
    if held.file is not None:
        held.file.seek(0)
        held.file.truncate()
        fcntl.flock(held.file.fileno(), fcntl.LOCK_UN)
        held.file.close()


@contextmanager
def holding(project: LoadedProject, names: Iterable[str], *, doing: Doing) -> Iterator[None]:
    """Hold the lock of each table in `names` for the block; raises `TableBusyError`
    naming every table another process holds (and holds none of them) if any is."""
    names = list(dict.fromkeys(names))
    taken: list[Path] = []
    busy: dict[str, str] = {}
    with _guard:
        for name in names:
            path = lock_file(project.checkpoint_path(name))
            if path in _held:
                _held[path].count += 1
                taken.append(path)
                continue
            got = _acquire(path, doing)
            if isinstance(got, str):
                busy[name] = got
            else:
                _held[path] = got
                taken.append(path)
    if busy:
        for path in taken:
            _release(path)
        raise _busy_error(project, busy, doing)
    try:
        yield
    finally:
        for path in taken:
            _release(path)


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
