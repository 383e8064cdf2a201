"""The server's group flusher and append notifier, on a real event loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from streams.broker.waiting import AppendNotifier, GroupFlusher


class _SlowFlush:
    """A flush that takes a while and counts how often it ran (and who was waiting)."""

    def __init__(self, seconds: float = 0.05, fail: bool = False) -> None:
        self.calls = 0
        self.seconds = seconds
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self) -> int:
        with self.lock:
            self.calls += 1
        time.sleep(self.seconds)
        if self.fail:
            raise OSError("disk full")
        return 1


def test_callers_arriving_during_a_flush_share_the_next_one() -> None:
    flush = _SlowFlush()
    flushed_events = []

    async def main() -> None:
        flusher = GroupFlusher(flush, on_flushed=lambda: flushed_events.append(1))
        first = flusher.flush()
        await asyncio.sleep(0.01)  # the first flush is running now
        waiting = [flusher.flush() for _ in range(20)]
        await asyncio.wait_for(asyncio.gather(first, *waiting), 10)
        assert flush.calls == 2  # one for `first`, one shared by the 20 that came later
        await asyncio.wait_for(flusher.flush(), 10)
        assert flush.calls == 3  # a caller after completion gets a fresh flush

    asyncio.run(main())
    assert len(flushed_events) == 3


def test_a_failed_flush_fails_every_waiter() -> None:
    async def main() -> None:
        flusher = GroupFlusher(_SlowFlush(seconds=0.01, fail=True))
        results = await asyncio.wait_for(
            asyncio.gather(*(flusher.flush() for _ in range(5)), return_exceptions=True), 10
        )
        assert all(isinstance(r, OSError) for r in results)

    asyncio.run(main())


def test_notifier_wakes_waiters_of_that_partition_and_cleans_up() -> None:
    async def main() -> None:
        notifier = AppendNotifier()
        woken = asyncio.create_task(notifier.wait([("t", 0), ("t", 1)], timeout=30))
        other = asyncio.create_task(notifier.wait([("u", 0)], timeout=0.05))
        await asyncio.sleep(0.01)
        notifier.notify("t", 1)
        await asyncio.wait_for(woken, 5)
        await asyncio.wait_for(other, 5)  # times out on its own, no error
        assert notifier._waiters == {}
        everyone = asyncio.create_task(notifier.wait([("v", 3)], timeout=30))
        await asyncio.sleep(0.01)
        notifier.notify_all()
        await asyncio.wait_for(everyone, 5)

    asyncio.run(main())


@pytest.mark.parametrize("timeout", [0, -1])
def test_notifier_does_not_wait_without_time(timeout: float) -> None:
    notifier = AppendNotifier()

    async def main() -> float:
        started = time.monotonic()
        # bounded: a wait that treats "no time" as "forever" fails here in a second
        # instead of hanging until pytest's timeout
        await asyncio.wait_for(notifier.wait([("t", 0)], timeout), 1)
        return time.monotonic() - started

    assert asyncio.run(main()) < 0.5
    assert notifier._waiters == {}
