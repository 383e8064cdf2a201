"""The one-pass write strategy: a batch parsed (Kafka), judged and written as it is read,
nothing persisted, its counts observed during the write; a Kafka batch is read again
only for its quarantine (`warehouse.compile.strategy.one_pass` says which tables).

pyspark is imported inside functions.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from warehouse.write.context import BatchContext, Outcome, observed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from warehouse.compile.inputs import KafkaInput
    from warehouse.compile.program import TableProgram

logger = logging.getLogger(__name__)


class OnePassWrite:
    """Writes a batch of its table in one pass; a replay (already committed) it leaves to
    the next strategy: its write is skipped, so nothing would observe it.

    Concurrency: query thread only, one batch at a time."""

    name = "one pass"

    def __init__(self, program: TableProgram) -> None:
        self.program = program

    def write(self, batch: BatchContext) -> Outcome | None:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        if batch.replay:
            return None
        program, kafka = self.program, self.program.reads_kafka
        tag = f"{program.name}_{batch.batch_id}_{uuid.uuid4().hex[:8]}"
        parse_seen = checks_seen = None
        good = batch.df
        if kafka:
            parse_seen = Observation(f"wh_parse_{tag}")
            good = self._input.parse(batch.df, observe=parse_seen).good
        checks = program.checks
        written_seen = None
        if checks is not None:
            # what the checks keep is what is written: their observation counts it
            checks_seen = Observation(f"wh_checks_{tag}")
            good = checks.observe(good, checks_seen)
        else:
            written_seen = Observation(f"wh_written_{tag}")
            good = good.observe(written_seen, F.count(F.lit(1)).alias("rows"))
        version = batch.write(good)

        wait = 10.0 if version is not None else 0.0  # a skipped write ran nothing
        p, c, w = (observed(o, wait=wait) for o in (parse_seen, checks_seen, written_seen))
        if checks is not None and c is not None:
            w = {"rows": int(c["rows"]) - int(c["removed"])}
        known = (not kafka or p is not None) and w is not None and (checks is None or c is not None)
        if not known:
            # Nothing lost if the write did not report its counts: a Kafka batch is read
            # again for its quarantine; a table's has none on this path.
            logger.warning(
                "table %s: batch %d: the write reported no counts; %s",
                program.name,
                batch.batch_id,
                "re-reading the batch for its quarantine"
                if kafka
                else "its progress line and quality events go without them",
            )
        quarantined = self._quarantine(batch, known=known, parse=p, checks=c) if kafka else 0
        if checks is not None and c is not None:
            batch.record_quality(
                checks.observed_metrics(c, table=program.name, batch_id=batch.batch_id)
            )
        written = int(w["rows"]) if w else 0
        if p:
            rows_in = int(p["records"])
        elif c and not kafka:
            rows_in = int(c["rows"])
        else:
            rows_in = written + quarantined
        return Outcome(
            rows_in=rows_in,
            written=written,
            quarantined=quarantined,
            dropped=int(c["removed"]) - int(c["quarantined"]) if c else 0,
            version=version,
        )

    @property
    def _input(self) -> KafkaInput:
        source = self.program.input
        assert self.program.reads_kafka
        return source  # type: ignore[return-value]

    def _quarantine(
        self,
        batch: BatchContext,
        *,
        known: bool,
        parse: dict[str, Any] | None,
        checks: dict[str, Any] | None,
    ) -> int:
        """The Kafka batch's quarantine, when the pass saw a malformed or quarantined
        record or could not tell: the rows committed."""
        want_parse = not known or bool(parse and parse["flagged"])
        want_checks = self.program.checks is not None and (
            not known or bool(checks and checks["quarantined"])
        )
        if not (want_parse or want_checks):
            return 0
        return self._read_again(
            batch,
            want_parse=want_parse,
            want_checks=want_checks,
            suspects=_suspects(
                ([(parse, "flagged_at")] if want_parse else [])
                + ([(checks, "quarantined_at")] if want_checks else [])
            ),
        )

    def _read_again(
        self,
        batch: BatchContext,
        *,
        want_parse: bool,
        want_checks: bool,
        suspects: set[int] | None,
    ) -> int:
        """Second pass: the batch's quarantine rows, read again and parsed the same way.
        With `suspects` (the `record_hash`es of the records the first pass set aside),
        only those records are parsed again: the parse and the expectations judge each
        record alone, so they find the same rows among them as among the whole batch."""
        df = batch.df
        if suspects is not None:
            logger.info(
                "table %s: batch %d: %d record(s) of the batch read again for its quarantine",
                batch.table,
                batch.batch_id,
                len(suspects),
            )
            # Read once and held (a few records): both kinds of quarantine rows are
            # parsed from them. Unheld, the union below would read the batch once per
            # kind, in two jobs at once.
            df = batch.cache(_only(df, suspects))
            df.count()
        else:
            logger.info(
                "table %s: batch %d: the whole batch read again for its quarantine",
                batch.table,
                batch.batch_id,
            )
        checks = self.program.checks
        hooks: dict[str, Any] = {}
        if want_parse and want_checks and suspects is None:
            # Both kinds come from one parse, persisted or the union would read the batch
            # twice; only its suspects are persisted (the records the parse flags and the
            # rows a quarantine expectation fails), not every record.
            from pyspark.sql import functions as F

            from streams.kafka import FLAGGED_COLUMN

            assert checks is not None
            suspect = F.col(FLAGGED_COLUMN)
            for check in checks.checks:
                if check.on_violation == "quarantine":
                    suspect = suspect | check.failed_column()

            def held(frame: DataFrame) -> DataFrame:
                return batch.cache(frame.where(suspect))

            hooks["persist"] = held
        parsed = self._input.parse(df, **hooks)
        parts = []
        if want_parse:
            parts.append(batch.parse_quarantine(parsed.bad))
        if want_checks:
            assert checks is not None
            parts.append(checks.quarantined(parsed.good, batch_id=batch.batch_id))
        return batch.write_quarantine(parts)


def _suspects(wanted: list[tuple[dict[str, Any] | None, str]]) -> set[int] | None:
    """The record hashes the first pass listed under each (observed metrics, key) of
    `wanted` (`flagged_at` of the parse, `quarantined_at` of the expectations); None
    when one lists none (not observed, or more records than `streams.kafka.SUSPECTS_CAP`):
    the second pass then reads the whole batch again."""
    from streams.kafka import parse_hashes

    hashes: set[int] = set()
    for seen, key in wanted:
        listed = parse_hashes(seen.get(key)) if seen else None
        if listed is None:
            return None
        hashes |= listed
    return hashes


def _only(df: DataFrame, hashes: set[int]) -> DataFrame:
    """The records of the Kafka batch `df` whose `record_hash` is in `hashes` (a
    broadcast semi join, before any parse)."""
    from pyspark.sql import functions as F

    from streams.kafka import record_hash

    listed = df.sparkSession.createDataFrame([(h,) for h in sorted(hashes)], "__wh_hash long")
    at = record_hash(df["topic"], df["partition"], df["offset"])
    return df.join(F.broadcast(listed), at == listed["__wh_hash"], "left_semi")
