"""`FileRecords`: the batches a fetch returns, as ranges of segment files (Kafka `FileRecords`).

A fetch answers with whole batches exactly as stored. Rather than reading them
into memory and copying them again into the socket, `PartitionLog.read_records`
returns the file ranges; the connection hands them to the kernel with
`loop.sendfile` (`os.sendfile`), so the bytes go from the page cache to the
socket without passing through Python.

`PartitionLog` picks the ranges (`Slice`s, see `PartitionLog.read_records`);
this module only holds them and reads or closes them.

Each range holds its own duplicate of the segment's descriptor: retention,
compaction or topic deletion closing the segment meanwhile does not invalidate
a response being sent (a deleted file stays readable through it). `close()`
once sent; a `FileRecords` dropped unsent closes its descriptors when collected.

Concurrency: built under the log's lock by `PartitionLog`; afterwards owned by
the one task that sends or reads it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from streams.broker.errors import KafkaStorageError
from streams.broker.storage.segment import LogSegment

__all__ = ["FileRange", "FileRecords", "Slice"]

Slice = tuple[LogSegment, int, int]  # segment, start position, end position


@dataclass(frozen=True, slots=True)
class FileRange:
    """`size` bytes at `position` of the file open as `fd` (owned by a `FileRecords`)."""

    fd: int
    position: int
    size: int


class FileRecords:
    """Record batches in one or more segment files; `len()` is their total size in bytes."""

    __slots__ = ("ranges", "_size", "_closed")

    def __init__(self, ranges: Sequence[FileRange]) -> None:
        self.ranges = tuple(ranges)
        self._size = sum(r.size for r in self.ranges)
        self._closed = False

    @classmethod
    def of(cls, slices: Sequence[Slice]) -> FileRecords:
        """Duplicate each segment's descriptor; call with the log's lock held."""
        ranges: list[FileRange] = []
        try:
            for seg, start, end in slices:
                ranges.append(FileRange(seg.dup_fd(), start, end - start))
        except OSError:
            for r in ranges:
                os.close(r.fd)
            raise
        return cls(ranges)

    def __len__(self) -> int:
        return self._size

    def __bytes__(self) -> bytes:
        """The batches read into memory (for small fetches and non-socket callers)."""
        if self._closed:
            raise ValueError("FileRecords is closed")
        parts = []
        for r in self.ranges:
            data = os.pread(r.fd, r.size, r.position)
            if len(data) != r.size:
                raise KafkaStorageError(
                    f"segment file shrank while being read: `{len(data)}` of `{r.size}` "
                    f"bytes at position `{r.position}` (truncated concurrently)"
                )
            parts.append(data)
        return b"".join(parts)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for r in self.ranges:
            os.close(r.fd)

    def __enter__(self) -> FileRecords:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRecords({len(self.ranges)} range(s), {self._size} bytes)"
