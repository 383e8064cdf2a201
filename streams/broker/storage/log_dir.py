"""`LogDirFailureChannel`: which log directories went offline after an I/O error.

Kafka takes a whole log directory offline when any write, flush or read of a
file in it fails (`LogDirFailureChannel.maybeAddOfflineLogDir`), and from then
on answers KAFKA_STORAGE_ERROR for every partition in it until the broker is
restarted. A failed fsync is the case that makes this necessary: after it,
the kernel may have dropped the dirty pages it could not write while still
serving them from the page cache, so nothing the directory holds beyond the
last good flush can be trusted, and appending on top of it would acknowledge
data a crash can take away. The same holds for a short or failed write (disk
full): the segment's tail is then unknown until recovery truncates it.

This broker has one log directory, the data dir; `LogManager` shares one
channel with all its `PartitionLog`s, and a log created on its own gets one of
its own.

Concurrency contract: thread-safe (flushes run in worker threads and report
failures here while the loop thread checks the state).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from streams.broker.errors import KafkaStorageError

logger = logging.getLogger(__name__)

__all__ = ["LogDirFailureChannel"]


class LogDirFailureChannel:
    """Offline log directories and the error that took each offline."""

    def __init__(self) -> None:
        self._offline: dict[Path, str] = {}
        self._lock = threading.Lock()

    def maybe_add_offline_log_dir(self, log_dir: Path, message: str, error: BaseException) -> None:
        """Take `log_dir` offline (once; later calls only log at debug level)."""
        key = Path(log_dir)
        with self._lock:
            first = key not in self._offline
            if first:
                self._offline[key] = f"{message}: {error}"
        if first:
            logger.error(
                "Log dir %s is offline: %s: %s. Every partition in it answers "
                "KAFKA_STORAGE_ERROR until the broker is restarted on a healthy disk; "
                "recovery then truncates what was not made durable.",
                key,
                message,
                error,
            )
        else:
            logger.debug("Log dir %s (already offline): %s: %s", key, message, error)

    def is_offline(self, log_dir: Path) -> bool:
        return bool(self._offline) and Path(log_dir) in self._offline

    def check(self, log_dir: Path, *, name: str) -> None:
        """Raise `KafkaStorageError` when `log_dir` is offline (`name`: the log asking).

        Asked for every partition a fetch or produce touches, several times each: while no
        directory is offline it answers without building a `Path` (which cost a fetch of a
        Connect worker's 25-partition offsets topic more than its reads did)."""
        if not self._offline:
            return
        reason = self._offline.get(Path(log_dir))
        if reason is not None:
            raise KafkaStorageError(
                f"Log `{name}`: log dir `{log_dir}` is offline since an I/O error ({reason}); "
                "restart the broker once the disk is healthy.",
                path=str(log_dir),
            )
