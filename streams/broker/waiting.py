"""What requests wait on: appends (long-polling fetches) and a shared fsync (acks=all).

- `AppendNotifier`: a fetch with nothing to return waits until a partition it
  reads is appended to, or its `max_wait_ms` passes.
- `GroupFlusher`: produces that must wait for an fsync (durability=sync) share
  one `LogManager.flush_dirty()` per interval instead of one fsync each.

Concurrency contract: both are used from the broker's asyncio loop thread only;
the flush itself runs in a worker thread (`asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["AppendNotifier", "GroupFlusher"]


class AppendNotifier:
    """Wakes long-polling fetches when a partition they wait on gets data."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future[None]]] = {}

    def notify_all(self) -> None:
        """Wake every waiting fetch (the high watermark of sync topics moved on fsync)."""
        waiters, self._waiters = self._waiters, {}
        for futs in waiters.values():
            for fut in futs:
                if not fut.done():
                    fut.set_result(None)

    def notify(self, topic: str, partition: int) -> None:
        waiters = self._waiters.pop((topic, partition), None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait(self, partitions: list[tuple[str, int]], timeout: float) -> None:
        """Return when any of `partitions` was appended to, or after `timeout` seconds."""
        if timeout <= 0 or not partitions:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for tp in partitions:
            self._waiters.setdefault(tp, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            for tp in partitions:
                waiters = self._waiters.get(tp)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[tp]


class GroupFlusher:
    """One `flush_dirty()` shared by every caller waiting in the same interval.

    A caller awaiting `flush()` is satisfied by the first flush that *starts*
    after it called; callers arriving while a flush runs share the next one.
    """

    def __init__(self, flush: Any, *, on_flushed: Any = None) -> None:
        self._flush = flush
        self._on_flushed = on_flushed
        self._running: asyncio.Task[None] | None = None
        self._next: asyncio.Future[None] | None = None

    def flush(self) -> asyncio.Future[None]:
        """Request a flush; the returned future completes when one that started later ends."""
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = loop.create_future()
        fut = self._next
        if self._running is None:
            self._running = loop.create_task(self._run())
        return fut

    @staticmethod
    def detach(fut: asyncio.Future[None]) -> None:
        """Nobody awaits `fut`: keep a failure from being reported as never retrieved."""
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def _run(self) -> None:
        try:
            while self._next is not None:
                fut, self._next = self._next, None
                try:
                    await asyncio.to_thread(self._flush)
                except Exception as e:  # noqa: BLE001 -- a failed fsync must fail every waiting produce
                    logger.error("group flush failed: %s", e)
                    if not fut.done():
                        fut.set_exception(e)
                    continue
                if not fut.done():
                    fut.set_result(None)
                if self._on_flushed is not None:
                    self._on_flushed()
        finally:
            self._running = None
