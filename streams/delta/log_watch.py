"""Waiting for a file to appear in a local Delta log folder (`LogWatch`).

A continuous reader of a local table waits in its trigger for the upstream's next commit
file (`streams.delta.source`). On this machine a process that wakes to look costs about
0.2 ms of CPU a wake, so a look every 50 ms cost 4 ms of CPU a second per waiting query,
more than the triggers the wait saves. On Linux the folder is watched with inotify: the
process sleeps until an entry is created or renamed into the folder (Delta writes a
commit whole, by rename or by a link that fails when the name exists), then looks. A
change the kernel does not see (another host writing over NFS) ends the wait at its
deadline, as if nothing came: where the folder is on a network file system
(`remote_folder`) a wait lasts at most `UNSEEN_WAIT`. Elsewhere, or when inotify cannot
be had (the per-user limit of instances), it looks every `PROBE_EVERY` seconds.

A wait may also end at a wake file's appearance (`wake`, another local folder watched the
same way): the query's stop creates it, so that the stop does not wait for the trigger.
And it ends when the process's parent (Spark's JVM, which started the source's runner)
exits: no one is left to answer, and the runner should not outlive a killed driver by a
whole wait.

The reader of a query that joins other tables' streams waits for any of their logs
(`others`): Spark asks the query's sources one after the other in a trigger, so a wait
in one source must end once another has new input. A wait ends at once, with nothing,
when an entry came into another folder since the previous wait began (the other source
may have been asked before that entry came, and is asked again in the next trigger),
and no wait happens where those folders cannot be watched.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import struct
import sys
import time
from collections.abc import Sequence

logger = logging.getLogger(__name__)

PROBE_EVERY = 0.05
"""Seconds between two looks for the file where the folder cannot be watched."""

UNSEEN_WAIT = 1.0
"""The longest wait, in seconds, on a folder whose other hosts' writes inotify does not
report (`remote_folder`)."""

_REMOTE_MAGIC = frozenset(
    {
        0x6969,  # NFS
        0x517B,  # SMB
        0xFF534D42,  # CIFS
        0xFE534D42,  # SMB2
        0x65735546,  # FUSE (sshfs, s3fs, blobfuse, gcsfuse, ...)
        0x00C36400,  # Ceph
        0x01021997,  # 9p
        0x5346414F,  # AFS
        0x0BD00BD0,  # Lustre
        0x47504653,  # GPFS
    }
)
"""statfs(2) `f_type`s of file systems another host can write to."""

_EVENT_HEAD = struct.Struct("iIII")
"""`struct inotify_event` before its name: wd, mask, cookie, len."""
_IN_CREATE = 0x100
_IN_MOVED_TO = 0x80
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC


class LogWatch:
    """Waits for files of one local folder.

    One owner at a time (a stream reader's trigger); not to be pickled while watching
    (`__getstate__` leaves the watch behind, and a copy watches anew)."""

    def __init__(self, folder: str, *, wake: str | None = None, others: Sequence[str] = ()) -> None:
        self.folder = folder
        self.wake = wake
        self.others = tuple(others)
        self._fd: int | None = None
        self._parent: int | None = None
        self._other_wds: frozenset[int] = frozenset()
        self._others_moved = False
        self._tried = False
        self._remote = False

    def __getstate__(self) -> dict[str, object]:
        return {"folder": self.folder, "wake": self.wake, "others": self.others, "_fd": None,
                "_parent": None, "_other_wds": frozenset(), "_others_moved": False,
                "_tried": False, "_remote": False}  # fmt: skip

    def wait_for(self, name: str, timeout: float) -> bool:
        """Whether `name` is in the folder within `timeout` seconds (at most `UNSEEN_WAIT`
        on a network file system); False at once when the wake file is there, and when
        another folder had an entry since the previous wait began (`others`)."""
        path = os.path.join(self.folder, name)
        fd = self._watch()
        if self.others:
            if fd is None or self._remote:  # the other inputs cannot be seen: no wait
                return os.path.exists(path)
            moved, self._others_moved = self._others_moved, _drain(fd, self._other_wds)
            if moved or self._others_moved:
                return os.path.exists(path)
        if self._remote:
            timeout = min(timeout, UNSEEN_WAIT)
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            left = deadline - time.monotonic()
            if left <= 0 or self.woken():
                return False
            if fd is None:
                time.sleep(min(PROBE_EVERY, left))
                continue
            ready, _, _ = select.select(
                [fd] if self._parent is None else [fd, self._parent], [], [], left
            )
            if self._parent is not None and self._parent in ready:
                return False  # the parent exited
            if ready and _drain(fd, self._other_wds):
                self._others_moved = True
                return os.path.exists(path)
        return True

    def woken(self) -> bool:
        """Whether the wake file is there."""
        return self.wake is not None and os.path.exists(self.wake)

    def close(self) -> None:
        for fd in (self._fd, self._parent):
            if fd is not None:
                os.close(fd)
        self._fd = self._parent = None

    def __del__(self) -> None:
        self.close()

    def _watch(self) -> int | None:
        """The inotify descriptor watching the folder, or None where there is none."""
        if self._tried:
            return self._fd
        self._tried = True
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            folders = (self.folder, *self.others)
            self._remote = any(remote_folder(libc, f) for f in folders)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "inotify_init1")
            wds = []
            for folder in folders:
                wd = libc.inotify_add_watch(fd, os.fsencode(folder), _IN_CREATE | _IN_MOVED_TO)
                if wd < 0:
                    err = ctypes.get_errno()
                    os.close(fd)
                    raise OSError(err, f"inotify_add_watch {folder}")
                wds.append(wd)
        except (OSError, AttributeError) as e:
            logger.info("%s: not watched (%s); looking every %.2f s", self.folder, e, PROBE_EVERY)
            return None
        wake_folder = os.path.dirname(self.wake) if self.wake else None
        if wake_folder and libc.inotify_add_watch(fd, os.fsencode(wake_folder), _IN_CREATE) < 0:
            # Not on this host (a Connect server's reader of a client's query): the wait
            # ends at its deadline, and so may the stop.
            logger.info("%s: wake folder not watched (errno %d)", wake_folder, ctypes.get_errno())
            self.wake = None
        try:  # readable once the parent exits (Linux 5.3)
            self._parent = os.pidfd_open(os.getppid())
        except (OSError, AttributeError):
            self._parent = None
        # A folder watched twice (a table joined to itself) has one descriptor: its own
        # entries then also count as another's, which only ends a wait sooner.
        self._other_wds = frozenset(wds[1:])
        self._fd = fd
        return fd


def remote_folder(libc: ctypes.CDLL, folder: str) -> bool:
    """Whether `folder` is on a file system other hosts write to (NFS, SMB, FUSE, ...),
    whose changes by them inotify does not report."""
    buf = ctypes.create_string_buffer(256)  # struct statfs: f_type is its first field
    if libc.statfs(os.fsencode(folder), buf) != 0:
        return False
    return ctypes.c_ulong.from_buffer(buf).value & 0xFFFFFFFF in _REMOTE_MAGIC


def _drain(fd: int, others: frozenset[int]) -> bool:
    """Read the events waiting on `fd`; whether any was of a watch in `others` (of the
    rest only the caller's file matters, which it looks for)."""
    moved = False
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return moved
        if not data:
            return moved
        offset = 0
        while offset + _EVENT_HEAD.size <= len(data):  # struct inotify_event, its name after
            wd, _mask, _cookie, length = _EVENT_HEAD.unpack_from(data, offset)
            moved = moved or wd in others
            offset += _EVENT_HEAD.size + length
