"""File names of the commit log, in one place (Kafka `LogFileUtils`).

A partition is a directory of segments. Every file of a segment is named by the
segment's base offset, zero-padded to 20 digits, plus a suffix:

- `00000000000000000000.log`        record batches exactly as received, offsets assigned
- `00000000000000000000.index`      sparse offset index (relative offset -> file position)
- `00000000000000000000.timeindex`  sparse time index (max timestamp so far -> relative offset)
- `00000000000000000000.txnindex`   aborted transactions whose abort marker is in this segment
- `00000000000000000000.snapshot`   producer state as of that offset (`producer_state.py`),
                                    written at a roll and a clean shutdown

Suffixes appended to a whole file name mark files in flight:
`.cleaned` (a compacted segment being written), `.deleted` (a segment being
replaced by a compacted one, see `cleaner.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
DELETED_SUFFIX = ".deleted"

INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

#: Written by `PartitionLog.close()`, removed on open: its absence means the
#: last shutdown was unclean and the active segment must be scanned.
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
#: Per-partition file holding the log start offset (advanced by retention and
#: DeleteRecords beyond the first segment's base offset).
LOG_START_OFFSET_FILE = "log-start-offset"
#: LogManager's topic metadata (names, partition counts, ids, config overrides).
TOPICS_FILE = "topics.json"
#: Suffix of a partition directory whose topic was deleted and is being removed.
DELETE_DIR_SUFFIX = "-delete"

_DIGITS = 20


def filename_prefix(base_offset: int) -> str:
    """`42` -> `00000000000000000042`."""
    return f"{base_offset:0{_DIGITS}d}"


def segment_file(directory: Path, base_offset: int, suffix: str) -> Path:
    """The path of one file of the segment starting at `base_offset`."""
    return directory / (filename_prefix(base_offset) + suffix)


def base_offset_of(name: str) -> int | None:
    """The base offset a segment file name encodes, or None if it is not a segment file."""
    stem = name.split(".", 1)[0]
    if len(stem) != _DIGITS or not stem.isdigit():
        return None
    return int(stem)


def partition_dir_name(topic: str, partition: int) -> str:
    """Kafka's `<topic>-<partition>` directory name."""
    return f"{topic}-{partition}"


def fsync_dir(directory: Path) -> None:
    """Make renames and creations in `directory` durable (POSIX needs a directory fsync)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never half."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
