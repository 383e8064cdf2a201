"""Waiting for a file to appear in a local Delta log folder (`LogWatch`).

A continuous reader of a local table waits in its trigger for the upstream's next commit
file (`streams.delta.source`). On this machine a process that wakes to look costs about
0.2 ms of CPU a wake, so a look every 50 ms cost 4 ms of CPU a second per waiting query,
more than the triggers the wait saves. On Linux the folder is watched with inotify: the
process sleeps until an entry is created or renamed into the folder (Delta writes a
commit whole, by rename or by a link that fails when the name exists), then looks. A
change the kernel does not see (another host writing over NFS) ends the wait at its
deadline, as if nothing came. Elsewhere, or when inotify cannot be had (the per-user
limit of instances), it looks every `PROBE_EVERY` seconds.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import sys
import time

logger = logging.getLogger(__name__)

PROBE_EVERY = 0.05
"""Seconds between two looks for the file where the folder cannot be watched."""

_IN_CREATE = 0x100
_IN_MOVED_TO = 0x80
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC


class LogWatch:
    """Waits for files of one local folder.

    One owner at a time (a stream reader's trigger); not to be pickled while watching
    (`__getstate__` leaves the watch behind, and a copy watches anew)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._fd: int | None = None
        self._tried = False

    def __getstate__(self) -> dict[str, object]:
        return {"folder": self.folder, "_fd": None, "_tried": False}

    def wait_for(self, name: str, timeout: float) -> bool:
        """Whether `name` is in the folder within `timeout` seconds."""
        path = os.path.join(self.folder, name)
        deadline = time.monotonic() + timeout
        fd = self._watch()
        while not os.path.exists(path):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if fd is None:
                time.sleep(min(PROBE_EVERY, left))
                continue
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                _drain(fd)
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

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
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "inotify_init1")
            if libc.inotify_add_watch(fd, os.fsencode(self.folder), _IN_CREATE | _IN_MOVED_TO) < 0:
                err = ctypes.get_errno()
                os.close(fd)
                raise OSError(err, f"inotify_add_watch {self.folder}")
        except (OSError, AttributeError) as e:
            logger.info("%s: not watched (%s); looking every %.2f s", self.folder, e, PROBE_EVERY)
            return None
        self._fd = fd
        return fd


def _drain(fd: int) -> None:
    """Read the events waiting on `fd` (which of them came does not matter: the caller
    looks for its file)."""
    while True:
        try:
            if not os.read(fd, 65536):
                return
        except BlockingIOError:
            return
