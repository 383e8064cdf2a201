"""Where one table's micro-batches commit: its Delta targets, app id and commit info.

Exactly-once comes from the sink: `write_batch` commits with the app transaction
`(app_id, batch_id)` and skips a batch it already committed, so a replayed batch
(after a crash between the Delta commit and Spark's commit log) changes nothing.
Each commit records the batch's Kafka end offsets, so `warehouse recover` can
rebuild a starting position from the table (DESIGN.md §4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from warehouse.runtime.errors import CheckpointError
from warehouse.spec.expectations import interval_seconds
from warehouse.spec.paths import QUARANTINE_SUFFIX
from warehouse.spec.table import UpsertSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from warehouse.compile.plan import TablePlan
    from warehouse.spec.table import TableDefinition


class BatchTargets:
    """A table's Delta table and quarantine table as batch commit targets.

    Concurrency: used from the query thread only (one batch at a time).
    """

    def __init__(self, *, defn: TableDefinition, plan: TablePlan, engines: dict[str, str]) -> None:
        self.defn = defn
        self.plan = plan
        self.engines = engines
        self._query_id: str | None = None

    def app_id(self) -> str:
        """The Delta app transaction id of this table's query (stable across restarts)."""
        return f"{self.defn.name}:{self._query_id_for()}"

    def _query_id_for(self) -> str:
        if self._query_id is None:
            from streams.delta import checkpoint_query_id

            qid = checkpoint_query_id(self.plan.checkpoint_path)
            if not qid:
                name, path = self.defn.name, self.plan.checkpoint_path
                fix = (
                    f"`warehouse recover --table {name}` rebuilds it from the offsets the "
                    "table's Delta log recorded"
                    if self.defn.spec.source.kafka is not None
                    else f"`warehouse reset --table {name} --yes` starts the table over"
                )
                raise CheckpointError(
                    f"Table `{name}`: the checkpoint `{path}` has no query id in its "
                    "`metadata` file (Spark writes one when the query starts), so the "
                    f"checkpoint is damaged; {fix}.",
                    table=name,
                    path=str(path),
                )
            self._query_id = qid
        return self._query_id

    def commit_info(self, batch_id: int) -> dict[str, Any]:
        """What each commit of batch `batch_id` records: its source end offsets, batch, table."""
        from streams.delta import batch_end_offsets

        return {
            "warehouse.sourceOffsets": batch_end_offsets(self.plan.checkpoint_path, batch_id),
            "warehouse.batchId": batch_id,
            "warehouse.table": self.defn.name,
        }

    def target(self, *, quarantine: bool) -> Any:
        """The `DeltaTarget` of the table, or of its quarantine table."""
        from streams.delta import DeltaTarget

        sink = self.defn.spec.sink
        # A Kafka offset is unique within its partition: a Parquet dictionary of them
        # only costs the writer time (benchmarks.md, "Parquet settings").
        unique = ("_offset",) if self.defn.spec.source.kafka is not None else ()
        if quarantine:
            return DeltaTarget(
                self.plan.quarantine_path,
                mode="append",
                app_id=f"{self.app_id()}:quarantine",
                engine=self.engines["delta"],  # type: ignore[arg-type]
                table=self.defn.name + QUARANTINE_SUFFIX,
                unique_columns=unique,
            )
        # A Kafka-sourced table records every batch, empty ones too: its commits carry
        # the offsets `warehouse recover` starts from. A table-sourced one does not
        # commit a batch that changes nothing: each version would be a batch of every
        # query reading the table (a batch of an inner stream-stream join that matched
        # nothing, of an aggregate whose input was filtered out).
        extra: dict[str, Any] = {"record_empty": self.defn.spec.source.kafka is not None}
        if isinstance(sink, UpsertSink):
            extra["tombstone_retention"] = interval_seconds(sink.tombstone_retention)
        return DeltaTarget(
            self.plan.table_path,
            mode=sink.mode,
            keys=list(getattr(sink, "keys", []) or []),
            sequence_by=getattr(sink, "sequence_by", None),
            partition_by=list(sink.partition_by),
            app_id=self.app_id(),
            engine=self.engines["delta"],  # type: ignore[arg-type]
            table=self.defn.name,
            unique_columns=unique,
            **extra,
        )

    def committed(self, batch_id: int) -> bool:
        """Whether the table already has batch `batch_id` (a replay)."""
        from streams.delta import committed

        return committed(self.target(quarantine=False), batch_id)

    def write(
        self, df: DataFrame, batch_id: int, info: dict[str, Any], *, quarantine: bool
    ) -> int | None:
        """Write `df` as this batch's commit to the table (or its quarantine table); the new
        version, or None when the batch was already committed."""
        from streams.delta import write_batch

        target = self.target(quarantine=quarantine)
        return write_batch(df, batch_id, target, commit_info=info)
