"""The queries a run watches: whether each still runs, the progress of its batches.

A continuous run (`Pipeline.run(once=False)`) keeps a `LiveQuery` per running table and
looks at them once or twice a second; a look must cost the queries little, since it calls
into the JVM (docs/decisions/0057). A `--once` run notes each query's progress when it
ends (`note_progress`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warehouse.runtime.query import TableQuery
from warehouse.runtime.session import local_cores

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.streaming.listener import StreamingQueryProgress

INITIALIZING = ("Initializing StreamExecution", "Initializing sources")
"""`StreamingQuery.status` messages before a query has created its sources (and so started
the Python workers of Python data sources)."""


ONCE_SLOTS_ELSEWHERE = 2
"""Queries a `--once` run runs at once with `spark.concurrent_batches: auto` where the
master is not local (a cluster, Spark Connect): the driver plans and starts each query
and, on the python engine, runs its source's Python process, so two overlap one query's
fixed costs with another's batches without starting every table's Python worker at once
(each must connect back to the JVM within Spark's 10 s)."""


def once_slots(concurrent_batches: int | str, master: str | None) -> int | None:
    """How many queries a `--once` run runs at once (None: no limit). Each runs one batch at
    a time, back to back, so this is `spark.concurrent_batches`: `auto` is the cores of a
    local master (`master`, None on Spark Connect) and `ONCE_SLOTS_ELSEWHERE` on any other
    master and on Spark Connect, where this process does not know the driver's cores; 0 is
    no limit."""
    if concurrent_batches == "auto":
        return (local_cores(master) if master is not None else None) or ONCE_SLOTS_ELSEWHERE
    return int(concurrent_batches) or None


ACTIVE_EVERY = 5.0
"""Seconds between a continuous run's asks whether a query Spark runs is still active: a
query that failed outside its batches' writes (its source, its planning, its commit log)
is restarted or ends the run within this long."""


@dataclass
class LiveQuery:
    """A running continuous query and which start of its table it is."""

    cq: TableQuery
    query: StreamingQuery
    since: float
    attempt: int
    noted_to: int | None = None
    """Every batch up to this id has had its progress noted (or ran before this start)."""
    asked: float | None = None
    """When Spark was last asked whether the query is active (`running`)."""

    def running(self, now: float, every: float = ACTIVE_EVERY) -> bool:
        """Whether the query still runs, as far as the runner must know at `now`.

        A failed batch ends it at once (its writer's error); whether Spark ended it
        (`isActive`, a call into the JVM, which costs both processes CPU) is asked at
        most every `every` seconds, not at each of the runner's looks (one or two a second)
        (docs/decisions/0057)."""
        if self.cq.writer.stats.error is not None:
            return False
        if self.asked is not None and now - self.asked < every:
            return True
        self.asked = now
        return bool(self.query.isActive)

    def note_progress(self) -> None:
        """Note the progress of the batches that ran since the last call.

        `lastProgress` is one call to the JVM; `recentProgress` is one per update Spark
        keeps (100), about 38 ms of CPU when full (docs/decisions/0027). So the whole list is read only when the newest update does not
        follow the last one noted: at the first, or when more than one batch ran since.
        Noting an update again changes nothing.

        On a classic session the writer has counted every batch that ran (its
        `last_batch`) before Spark reports the batch's progress: while no batch ran
        since the start, or past the last one noted, there is nothing to read, and an
        idle query costs the runner no call to the JVM (a query whose first trigger
        waits for input has no progress for as long as it waits). A Connect server's
        batches are known only from the progress, which is read each time."""
        stats = self.cq.writer.stats
        if not self.cq.writer.remote and (
            stats.last_batch is None
            or (self.noted_to is not None and stats.last_batch <= self.noted_to)
        ):
            return
        last = self.query.lastProgress
        if last is None:
            return
        follows = self.noted_to is not None and int(last.batchId) <= self.noted_to + 1
        note_progress(self.cq, [last] if follows else self.query.recentProgress)
        # A batch that ran is done; a trigger without input reports the id yet to run.
        self.noted_to = int(last.batchId) if ran(last) else int(last.batchId) - 1

    def settling(self, limit: float) -> bool:
        """Still creating its sources (for at most `limit` seconds after its start)."""
        if time.monotonic() - self.since > limit or not self.query.isActive:
            return False
        if self.query.lastProgress is not None:
            return False
        return str(self.query.status.get("message", "")).startswith(INITIALIZING)


def may_start(live: dict[str, LiveQuery], waiting: dict[str, Any], settle_seconds: float) -> bool:
    """Whether the next table may start: one waits, and no live query is still creating
    its sources. While none waits, nothing is asked of the live queries: asking whether
    each is settling (whether it is active, and its newest progress: calls into the
    JVM) at every look cost the queries' first minute as much CPU as Spark's own polls
    of their sources (docs/decisions/0057)."""
    return bool(waiting) and not any(q.settling(settle_seconds) for q in live.values())


def ran(update: StreamingQueryProgress) -> bool:
    """A progress update of a batch that ran. A trigger that found no new input reports
    one too (every `spark.sql.streaming.noDataProgressEventInterval`), with no rows and
    the id of the batch yet to run."""
    return "addBatch" in update.durationMs


def note_progress(cq: TableQuery, updates: list[StreamingQueryProgress]) -> None:
    """Remember the source row count of each batch that ran (Spark keeps only the recent
    progress)."""
    for p in updates:
        if not ran(p):
            continue
        if cq.writer.remote:  # the batches ran on a Connect server: this is all there is
            cq.writer.note_remote(int(p.batchId), int(p.numInputRows))
        else:
            # The writer's own count wins: it knows the records of a Kafka batch.
            cq.writer.stats.input_rows.setdefault(int(p.batchId), int(p.numInputRows))
