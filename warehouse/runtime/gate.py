"""How many micro-batches of a continuous run write at once, and which goes next.

Every query of a continuous run is its own Spark thread, and a query whose input has
new data after each of its batches runs batches back to back. With more such queries
than cores, the cores are shared by all of them: each batch takes a whole round of
every query's work, and a record crossing four tables waits for about six rounds
(docs/architecture.md, "Continuous runs"; docs/decisions/0017). `BatchGate` lets `slots`
batches write at once, so a batch runs at the speed of the cores, and gives a free
slot to the waiting batch deepest in the table graph: a record an upstream table has
just committed goes on down its path before the next upstream batches start. The
total work is unchanged; what changes is the order.

Concurrency: `slot` is entered from the query threads of one run (each from inside
its `foreachBatch` call); one condition guards the counters and the queue.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager


class GateClosed(Exception):
    """The waiting batch's query is stopping; it never got a slot."""


class BatchGate:
    """At most `slots` batches inside at once; waiters enter deepest first, then in
    arrival order."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a batch gate needs at least one slot, not {slots}")
        self.slots = slots
        self._cond = threading.Condition()
        self._busy = 0
        self.peak = 0
        """The most batches inside at once so far."""
        self._held_total = 0.0
        self._kept_total = 0.0
        self._since = time.monotonic()
        self._queue: list[tuple[int, int]] = []
        self._held: dict[Hashable, float] = {}
        """Turns `reserve` keeps for a query's next batch, until when."""
        self._tickets = itertools.count()

    @contextmanager
    def slot(
        self,
        depth: int,
        *,
        cancelled: Callable[[], bool] = lambda: False,
        key: Hashable | None = None,
    ) -> Iterator[float]:
        """Hold a slot for the body; yields the seconds waited for it. Raises `GateClosed`
        when `cancelled()` turns true while waiting (checked every 0.1 s). A turn that
        `reserve` kept for `key` is taken without waiting."""
        began = time.monotonic()
        with self._cond:
            self._expire()
            self._account()
            if key is None or self._held.pop(key, None) is None:
                self._enter(depth, cancelled)
        try:
            yield time.monotonic() - began
        finally:
            with self._cond:
                self._account()
                self._busy -= 1
                self._cond.notify_all()

    def turn_seconds(self) -> tuple[float, float]:
        """Turn-seconds taken since the gate began (the integral of the turns held over
        time), and of them those kept by `reserve` for a query's next batch. Over a
        window, the first divided by its length is how many of the `slots` were in use
        on average."""
        with self._cond:
            self._account()
            return self._held_total, self._kept_total

    def _account(self) -> None:
        """Add the time since the last change to the totals; `_cond` held, called before
        every change of `_busy` or `_held`."""
        now = time.monotonic()
        span = now - self._since
        self._held_total += self._busy * span
        self._kept_total += len(self._held) * span
        self._since = now

    def reserve(
        self,
        key: Hashable,
        depth: int,
        *,
        cancelled: Callable[[], bool] = lambda: False,
        hold: float = 1.0,
    ) -> bool:
        """Wait for a turn as `slot` does and keep it for `key`'s next `slot` for `hold`
        seconds, then give it back. A query asks for its next batch's turn at the end of
        a batch, before Spark fixes the next batch's offsets, so what arrives while it
        waits is in that batch. False when `cancelled()` turned true while waiting."""
        with self._cond:
            self._expire()
            try:
                self._enter(depth, cancelled)
            except GateClosed:
                return False
            self._account()
            self._held[key] = time.monotonic() + hold
        return True

    def _enter(self, depth: int, cancelled: Callable[[], bool]) -> None:
        """Queue at `depth` and wait for a free slot; `_cond` held."""
        ticket = (-depth, next(self._tickets))
        heapq.heappush(self._queue, ticket)
        try:
            while self._busy >= self.slots or self._queue[0] != ticket:
                if cancelled():
                    raise GateClosed
                self._cond.wait(0.1)
                self._expire()
        except BaseException:
            self._queue.remove(ticket)
            heapq.heapify(self._queue)
            self._cond.notify_all()
            raise
        heapq.heappop(self._queue)
        self._account()
        self._busy += 1
        self.peak = max(self.peak, self._busy)
        self._cond.notify_all()  # the next in line may take another free slot

    def _expire(self) -> None:
        """Give back the kept turns whose query did not come for them; `_cond` held."""
        now = time.monotonic()
        for key, until in list(self._held.items()):
            if until <= now:
                self._account()
                del self._held[key]
                self._busy -= 1
                self._cond.notify_all()


def depths(upstream: Mapping[str, list[str]]) -> dict[str, int]:
    """Each table's depth in the graph: 0 without an upstream table, else one more than
    its deepest upstream (`upstream` maps every table to the tables it reads)."""
    found: dict[str, int] = {}

    def depth(name: str, seen: tuple[str, ...] = ()) -> int:
        if name not in found:
            ups = [u for u in upstream.get(name, []) if u in upstream and u not in seen]
            found[name] = 1 + max((depth(u, (*seen, name)) for u in ups), default=-1)
        return found[name]

    for name in upstream:
        depth(name)
    return found
