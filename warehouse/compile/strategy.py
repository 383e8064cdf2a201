"""How a table's batches are written, chosen once when the table compiles.

- `arrow`: Kafka JSON appended through Arrow in Spark's tasks (`streams.landing`),
  with the row expectations judged there; a batch it cannot take goes one pass;
- `one_pass`: parsed, judged and written as it is read, its counts observed during the
  write; a Kafka batch is read again only for its quarantine;
- `cached`: persisted once parsed and transformed, judged whole, then written.

A replayed batch (already committed) always takes the cached path: its write is
skipped, so nothing would observe it. The strategies themselves are `warehouse.write`.
No Spark import at module import.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from warehouse.spec.expectations import is_row_level
from warehouse.spec.table import AppendSink, TopicSource, UpsertSink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from streams.kafka import FetchOptions
    from streams.landing import WarmUp
    from warehouse.compile.engines import ResolvedEngines
    from warehouse.compile.inputs import KafkaInput, TableInput
    from warehouse.quality.arrow_rows import ArrowChecks
    from warehouse.spec.table import TableDefinition

logger = logging.getLogger(__name__)

Strategy = Literal["arrow", "one_pass", "cached"]


@dataclass(frozen=True)
class ArrowLanding:
    """What the Arrow path needs: the payload it types, the table's row expectations as
    Arrow rules (None without any) and how its tasks read the batch's Kafka ranges;
    `warm`, the job started at compile that starts the executors' Python workers for
    the first batch (None: none), which a batch waits for before its own job."""

    payload: StructType
    rules: ArrowChecks | None
    fetch: FetchOptions
    warm: WarmUp | None = None


def choose_strategy(
    defn: TableDefinition,
    source: KafkaInput | TableInput,
    engines: ResolvedEngines,
    *,
    spark: SparkSession,
    table_path: str,
) -> tuple[Strategy, ArrowLanding | None]:
    """The table's write strategy, and what the Arrow path needs when it is `arrow`."""
    if not one_pass(defn, source, engines):
        return "cached", None
    landing = arrow_landing(defn, source, engines, spark=spark, table_path=table_path)
    return ("arrow", landing) if landing is not None else ("one_pass", None)


def one_pass(
    defn: TableDefinition, source: KafkaInput | TableInput, engines: ResolvedEngines
) -> bool:
    """Whether the table's batches are written as they are read, without persisting them.

    For a Kafka-sourced table without a transform (a landing table, the high-volume
    case) or a table-sourced one (its transform is part of the streaming plan), whose
    expectations cannot fail the batch, appended or kept as SCD2 history (either Delta
    engine: an SCD2 batch is collected once, then planned on the driver) or upserted
    where the engine's MERGE reads its source once (`merge_reads_source_once`; counts
    observed on a source read several times would not be the batch's): the good rows
    are parsed (Kafka), judged and written in one pass, and the counts are observed
    during that write. A Kafka batch is read again only when that pass saw a malformed
    or quarantined record (a Kafka range reads the same records twice); a table-sourced
    one never is, so it takes this path only without an expectation that quarantines.
    Persisting and counting a batch costs Spark more than parsing it: on a small
    continuous batch the count alone is one Spark job of a table-sourced batch's two or
    three."""
    from warehouse.compile.inputs import KafkaInput

    spec = defn.spec
    kafka = isinstance(source, KafkaInput)
    if kafka and (spec.transform is not None or defn.sql is not None):
        return False
    if isinstance(spec.sink, UpsertSink) and not engines.delta.merge_reads_source_once:
        return False
    row_level = [e for e in spec.expectations if is_row_level(e)]
    if any(e.on_violation == "fail" for e in row_level):
        return False  # judged whole before the write (RowChecks.fail_fast)
    # A table's quarantine would come from computing the batch again, which need not give
    # the same rows: a joined snapshot read anew, a clock, a random number.
    return kafka or not any(e.on_violation == "quarantine" for e in row_level)


def may_land_in_arrow(defn: TableDefinition, parse: str) -> bool:
    """Whether the table's batches may take the Arrow landing path by its spec alone,
    which is known before a session exists: Kafka JSON of one cluster, appended, without
    a transform; `parse` (`engines.parse`, the project's or a run's resolved one) not
    `spark`. `arrow_landing` asks this first; what it asks then needs the compiled source
    and a session (a flat payload, expectations Arrow judges, tasks that reach the
    table), so a table this allows may still be parsed by Spark."""
    spec = defn.spec
    source = spec.source
    return (
        isinstance(source, TopicSource)
        and source.kafka.format == "json"
        and not source.kafka.federated
        and isinstance(spec.sink, AppendSink)
        and spec.transform is None
        and defn.sql is None
        and parse != "spark"
    )


def arrow_landing(
    defn: TableDefinition,
    source: KafkaInput | TableInput,
    engines: ResolvedEngines,
    *,
    spark: SparkSession,
    table_path: str,
) -> ArrowLanding | None:
    """What the Arrow path needs when the table's one-pass batches may take it
    (`streams.landing`), else None: a spec that allows it (`may_land_in_arrow`: Kafka
    JSON of one cluster appended, `engines.parse` not `spark`), row-level expectations
    Arrow judges as Spark does (`warehouse.quality.arrow_rows`) and flat payload types
    Arrow parses as Spark does. With engines whose own reads and commits are not already
    Python tasks and delta-rs commits (the native ones) also tasks that import the path
    and write under the table, and a table delta-rs appends to
    (`streams.landing.landing_blocker`; a warning says which is missing); with the Python
    ones a warm-up job in the background (`streams.landing.warm_up`), as the native ones'
    probe starts the executors' Python workers. Not for a federation: its tasks would
    read each range without knowing the range's cluster."""
    from warehouse.compile.inputs import KafkaInput

    spec = defn.spec
    if not isinstance(source, KafkaInput) or not may_land_in_arrow(defn, engines.parse):
        return None
    struct = source.payload_struct()
    if struct is None:
        return None
    from streams.landing import arrow_payload, landing_blocker, warm_up

    parsed = arrow_payload(struct)
    if parsed is None:
        return None
    rules = None
    if any(is_row_level(e) for e in spec.expectations):
        from warehouse.quality.arrow_rows import arrow_checks

        rules = arrow_checks(spec.expectations, parsed)
        if rules is None:
            logger.info(
                "table %s: an expectation is not judged in Arrow; Spark parses its batches",
                defn.name,
            )
            return None
    if not (engines.kafka.reads_in_python_tasks and engines.delta.commits_with_delta_rs):
        # The Python engines' own reads and commits need what the path needs; the
        # native ones are asked (`landing_blocker`).
        blocker = landing_blocker(spark, table_path)
        if blocker is not None:
            logger.warning(
                "table %s: not on the Arrow landing path, as %s; Spark parses and writes "
                "its batches",
                defn.name,
                blocker,
            )
            return None
        # The probe's tasks started the executors' Python workers and imported the path.
        return ArrowLanding(struct, rules, source.fetch_options())
    # The first batch's job would start the executors' Python workers (seconds on a
    # cluster): they start while the query does.
    warm = warm_up(spark, table_path, name=defn.name, carry=(rules,))
    return ArrowLanding(struct, rules, source.fetch_options(), warm)
