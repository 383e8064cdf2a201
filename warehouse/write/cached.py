"""The general write strategy: the batch persisted once parsed and transformed, judged
whole (an expectation that fails the batch does so before anything is written), then
written, then its quarantine. Takes every batch, replays included.

pyspark is imported inside functions.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from warehouse.write.context import BatchContext, Outcome, observed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation

    from warehouse.compile.program import TableProgram
    from warehouse.quality.rows import CheckedBatch


class CachedWrite:
    """Writes any batch of its table. Concurrency: query thread only, one batch at a time."""

    name = ""

    def __init__(self, program: TableProgram) -> None:
        self.program = program

    def write(self, batch: BatchContext) -> Outcome:
        # The source is read once: a Kafka batch is cached parsed (both the good rows and
        # the quarantine derive from it, one read and one parse), any other as it comes.
        counted: Observation | None = None
        if self.program.reads_kafka:
            rows_in, malformed, good, quarantine = self._parsed(batch)
        else:
            good, counted = _observed_cache(batch)
            rows_in, malformed, quarantine = -1, 0, []
        checks = self.program.checks
        checked = (
            None
            if checks is None
            else checks.apply(good, table=batch.table, batch_id=batch.batch_id)
        )
        try:
            return self._write(batch, rows_in, malformed, good, quarantine, checked, counted)
        finally:
            if checked is not None:
                checked.unpersist()

    def _parsed(self, batch: BatchContext) -> tuple[int, int, DataFrame, list[DataFrame]]:
        """The Kafka batch parsed (persisted once: good rows and quarantine derive from
        it), its good rows transformed and persisted: (records, malformed, good rows, the
        malformed records' quarantine)."""
        from streams.kafka import persisted_counts

        staged: list[DataFrame] = []

        def stage(frame: DataFrame) -> DataFrame:
            staged.append(batch.cache(frame))
            return staged[-1]

        program = self.program
        assert program.reads_kafka
        parsed = program.input.parse(batch.df, persist=stage)  # type: ignore[union-attr]
        rows_in, malformed = persisted_counts(staged[0])
        good = parsed.good
        if program.transform is not None:
            good = program.transform.apply(
                good, batch_id=batch.batch_id, registered=batch.registered
            )
        return rows_in, malformed, batch.cache(good), [batch.parse_quarantine(parsed.bad)]

    def _write(
        self,
        batch: BatchContext,
        rows_in: int,
        malformed: int,
        good: DataFrame,
        quarantine: list[DataFrame],
        checked: CheckedBatch | None,
        counted: Observation | None,
    ) -> Outcome:
        dropped = 0
        written = -1
        if checked is None:
            # A table-sourced batch without checks writes what it read (counted below).
            if self.program.reads_kafka:
                written = good.count()
        else:
            written, dropped = checked.kept, checked.dropped
            # Nothing set aside: `keep` is the batch already persisted (persisting it
            # again only makes Spark warn "Asked to cache already cached data").
            good = checked.keep if checked.keep.is_cached else batch.cache(checked.keep)
            if checked.quarantine is not None:
                quarantine.append(checked.quarantine)
        version = batch.write(good)
        if counted is not None:
            # A write that committed ran the batch's plan; a skipped one may not have.
            rows_in = _rows_read(good, counted, wait=10.0 if version is not None else 0.0)
            if written < 0:
                written = rows_in
        quarantined = 0
        # A clean batch (none malformed, none failing a quarantine expectation, both
        # counted already) has nothing to union, persist and count for the quarantine.
        if quarantine and malformed + (0 if checked is None else checked.quarantined):
            quarantined = batch.write_quarantine(quarantine)
        if checked is not None:
            batch.record_quality(checked.metrics)
        return Outcome(rows_in, written, quarantined, dropped, version)


def _observed_cache(batch: BatchContext) -> tuple[DataFrame, Observation]:
    """A table-sourced batch persisted with its rows counted where the persisted plan runs
    (an `Observation` below the cache), so that the write's own first job both fills the
    cache and counts the batch. A count job of its own before the write would be one
    Spark job more per batch: on a small batch of a native upsert, which collects its
    changes to the driver in one job and merges them there, one of its two (decision
    0059)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    seen = Observation(f"wh_read_{batch.table}_{batch.batch_id}_{uuid.uuid4().hex[:8]}")
    return batch.cache(batch.df.observe(seen, F.count(F.lit(1)).alias("rows"))), seen


def _rows_read(good: DataFrame, seen: Observation, *, wait: float) -> int:
    """The rows of the batch `good` (persisted by `_observed_cache`), as counted when a
    job of the write computed it (waiting up to `wait` seconds for Spark to report it);
    counted now when none did (a replay's write, skipped before reading the batch)."""
    got = observed(seen, wait=wait)
    if got is None:
        return good.count()
    return int(got["rows"])
