"""`OffsetMap`: key -> last offset for one cleaning pass, in a fixed memory budget.

Kafka's `SkimpyOffsetMap`: each key is stored as its 16-byte MD5 digest beside
an 8-byte offset (24 bytes a slot) in an open-addressing table inside a buffer
of `log.cleaner.dedupe.buffer.size` bytes, filled to at most
`log.cleaner.io.buffer.load.factor` (0.9). When the map is full the cleaner
stops the pass where it is and cleans up to there; the next pass goes on from
that offset. Here the table is three `array`s of machine words (two halves of
the digest and the offset), so the memory a pass holds is the slots times 24
bytes whatever the keys' sizes, and it is allocated for the keys the pass can
meet (`slots_for`), never above the configured buffer.

Concurrency contract: one cleaning pass owns a map; not thread-safe.
"""

from __future__ import annotations

import hashlib
import math
from array import array

__all__ = ["ENTRY_BYTES", "LOAD_FACTOR", "OffsetMap"]

ENTRY_BYTES = 24  # digest (16) + offset (8), as Kafka's SkimpyOffsetMap
LOAD_FACTOR = 0.9  # Kafka's log.cleaner.io.buffer.load.factor default


class OffsetMap:
    """Digest of a key -> the largest offset put for it; `capacity` keys at most."""

    def __init__(self, slots: int) -> None:
        self.slots = max(int(slots), 1)
        self.capacity = max(int(self.slots * LOAD_FACTOR), 1)
        # a digest half of 0 marks an empty slot; a real one is made odd, never 0
        self._hi = array("Q", bytes(8 * self.slots))
        self._lo = array("Q", bytes(8 * self.slots))
        self._offsets = array("q", bytes(8 * self.slots))
        self._size = 0

    @staticmethod
    def slots_for(keys: int, buffer_bytes: int) -> int:
        """Slots for `keys` keys at the load factor, bounded by a buffer of `buffer_bytes`."""
        wanted = math.ceil(max(keys, 1) / LOAD_FACTOR) + 1
        return max(1, min(wanted, buffer_bytes // ENTRY_BYTES))

    def __len__(self) -> int:
        return self._size

    @property
    def full(self) -> bool:
        return self._size >= self.capacity

    def _slot(self, key: bytes) -> tuple[int, int, int]:
        digest = hashlib.md5(key, usedforsecurity=False).digest()
        hi = int.from_bytes(digest[:8], "big") | 1
        lo = int.from_bytes(digest[8:], "big")
        i = hi % self.slots
        his, los = self._hi, self._lo
        while his[i] and (his[i] != hi or los[i] != lo):
            i = i + 1 if i + 1 < self.slots else 0
        return i, hi, lo

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` for `key` (a later offset replaces an earlier one). Raises
        `OverflowError` when the key is new and the map is full: check `room` first."""
        i, hi, lo = self._slot(key)
        if not self._hi[i]:
            if self._size >= self.capacity:
                raise OverflowError("offset map is full")
            self._hi[i], self._lo[i] = hi, lo
            self._size += 1
        self._offsets[i] = offset

    def get(self, key: bytes) -> int:
        """The offset put for `key`, or -1."""
        i, _, _ = self._slot(key)
        return self._offsets[i] if self._hi[i] else -1

    def room(self, keys: int) -> bool:
        """Whether `keys` more new keys surely fit."""
        return self._size + keys <= self.capacity
