"""Where one table's micro-batches commit: its Delta targets, app id and commit info.

Exactly-once comes from the sink: each batch commits with the app transaction
`(app_id, batch_id)` and a batch already committed is skipped, so a replayed batch
(after a crash between the Delta commit and Spark's commit log) changes nothing.
Each commit records the batch's Kafka end offsets, so `warehouse recover` can
rebuild a starting position from the table (docs/architecture.md, "Exactly-once").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from warehouse.compile.errors import CheckpointError
from warehouse.compile.federation import CLUSTERS_KEY, by_cluster, of_cluster
from warehouse.compile.sql import grouped_output, sql_text
from warehouse.spec.expectations import interval_seconds
from warehouse.spec.paths import QUARANTINE_SUFFIX
from warehouse.spec.table import Scd2Sink, Sink, TopicSource, UpsertSink, sink_keys

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streams.delta import DeltaTarget
    from warehouse.spec.model import LoadedProject
    from warehouse.spec.table import TableDefinition


@dataclass
class Targets:
    """A table's Delta table and quarantine table as batch commit targets.

    `from_kafka`: the table reads Kafka (its commits record offsets, empty batches
    included). The app id comes from the checkpoint's query id, which Spark writes when
    the query first starts: it is read once, at the first batch.

    Concurrency: used from the query thread only (one batch at a time)."""

    table: str
    table_path: str
    quarantine_path: str
    checkpoint: str
    sink: Sink
    from_kafka: bool
    engine: str
    clusters: tuple[str, ...] = ()
    """A federated table's clusters in its query's source order (empty otherwise): its
    commits record offsets by cluster (`warehouse.compile.federation`)."""
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    """A federated table's subscription, which keys its sources' initial offsets."""
    one_change_per_key: bool = False
    """Each batch holds at most one row per sink key (`one_change_per_key`)."""
    _query_id: str | None = field(default=None, init=False, repr=False)

    @classmethod
    def of_table(cls, project: LoadedProject, name: str, *, engine: str) -> Targets:
        """The targets of `project`'s table `name`, written with the Delta engine `engine`."""
        defn = project.tables[name]
        spec, src = defn.spec, defn.spec.source
        federated = isinstance(src, TopicSource) and src.kafka.federated
        return cls(
            table=name,
            table_path=str(project.table_path(name)),
            quarantine_path=str(project.quarantine_path(name)),
            checkpoint=str(project.checkpoint_path(name)),
            sink=spec.sink,
            from_kafka=isinstance(src, TopicSource),
            engine=engine,
            clusters=tuple(src.kafka.cluster_list) if federated else (),
            topics=tuple(src.kafka.topic_list) if federated else (),
            pattern=src.kafka.pattern if federated else None,
            one_change_per_key=one_change_per_key(defn, sql_text(project, defn)),
        )

    def app_id(self) -> str:
        """The Delta app transaction id of this table's query (stable across restarts)."""
        return f"{self.table}:{self._query_id_for()}"

    def _query_id_for(self) -> str:
        if self._query_id is None:
            from streams.delta import checkpoint_query_id

            qid = checkpoint_query_id(self.checkpoint)
            if not qid:
                name, path = self.table, self.checkpoint
                fix = (
                    f"`warehouse recover --table {name}` rebuilds it from the offsets the "
                    "table's Delta log recorded"
                    if self.from_kafka
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
        """What each commit of batch `batch_id` records: its source end offsets, the offsets
        it started from, batch, table. `warehouse recover` rebuilds a checkpoint that
        replays the table's newest batch from these two."""
        from streams.delta import batch_end_offsets

        info = {
            "warehouse.sourceOffsets": self._named(batch_end_offsets(self.checkpoint, batch_id)),
            "warehouse.batchId": batch_id,
            "warehouse.table": self.table,
        }
        start = self._start_offsets(batch_id)
        if start is not None:
            info["warehouse.startOffsets"] = start
        if self.from_kafka:
            self._note_data_loss(info, batch_id)
        return info

    def _note_data_loss(self, info: dict[str, Any], batch_id: int) -> None:
        """Record (`warehouse.dataLoss`) and log the partitions whose batch ends below its
        start: `on_data_loss: skip` found their log ending before the query's position and
        went on in the log there is now."""
        from streams.kafka import rewound

        start, end = info.get("warehouse.startOffsets"), info["warehouse.sourceOffsets"]
        if self.clusters:
            by = {c: rewound(of_cluster(start, c), of_cluster(end, c)) for c in self.clusters}
            lost_by = {c: lost for c, lost in by.items() if lost}
            if lost_by:
                info["warehouse.dataLoss"] = {CLUSTERS_KEY: lost_by}
            for cluster, lost in lost_by.items():
                self._log_loss(lost, batch_id, f" of cluster {cluster}")
            return
        lost = rewound(start, end)
        if not lost:
            return
        info["warehouse.dataLoss"] = lost
        self._log_loss(lost, batch_id)

    def _log_loss(self, lost: dict[str, Any], batch_id: int, where: str = "") -> None:
        for topic, parts in lost.items():
            for part, (position, end) in parts.items():
                logger.warning(
                    "table %s: batch %d: topic %s%s partition %s ends at offset %d, below the "
                    "query's position %d (the topic was created again, or the broker lost "
                    "records); on_data_loss=skip: going on in the log there is now, "
                    "recorded as warehouse.dataLoss in the batch's commit info",
                    self.table,
                    batch_id,
                    topic,
                    where,
                    part,
                    end,
                    position,
                )

    def _start_offsets(self, batch_id: int) -> dict[str, Any] | None:
        """Where batch `batch_id` started: the end of the batch before it, or for batch 0
        the initial offsets a Kafka source recorded in the checkpoint."""
        from streams.delta import batch_end_offsets

        if batch_id > 0:
            return self._named(batch_end_offsets(self.checkpoint, batch_id - 1))
        if not self.from_kafka:
            return None
        from streams.kafka import recorded_federation_initial_offsets, recorded_initial_offsets

        if self.clusters:
            return self._named(
                recorded_federation_initial_offsets(
                    self.checkpoint,
                    clusters=list(self.clusters),
                    topics=self.topics or None,
                    pattern=self.pattern,
                )
            )
        return recorded_initial_offsets(self.checkpoint)

    def _named(self, offsets: dict | None) -> dict | None:
        """A federated query's offsets by cluster, as its commits record them."""
        return by_cluster(offsets, self.clusters) if self.clusters else offsets

    @property
    def unique_columns(self) -> tuple[str, ...]:
        # A Kafka offset is unique within its partition: a Parquet dictionary of them
        # only costs the writer time (docs/decisions/0006).
        return ("_offset",) if self.from_kafka else ()

    def quarantine(self) -> DeltaTarget:
        """The `DeltaTarget` of the table's quarantine table."""
        from streams.delta import DeltaTarget

        return DeltaTarget(
            self.quarantine_path,
            mode="append",
            app_id=f"{self.app_id()}:quarantine",
            engine=self.engine,  # type: ignore[arg-type]
            table=self.table + QUARANTINE_SUFFIX,
            unique_columns=self.unique_columns,
        )

    def main(self) -> DeltaTarget:
        """The `DeltaTarget` of the table itself."""
        from streams.delta import DeltaTarget

        sink = self.sink
        # A Kafka-sourced table records every batch, empty ones too: its commits carry
        # the offsets `warehouse recover` starts from. A table-sourced one does not
        # commit a batch that changes nothing: each version would be a batch of every
        # query reading the table (a batch of an inner stream-stream join that matched
        # nothing, of an aggregate whose input was filtered out).
        extra: dict[str, Any] = {"record_empty": self.from_kafka}
        if isinstance(sink, UpsertSink):
            extra["tombstone_retention"] = interval_seconds(sink.tombstone_retention)
        return DeltaTarget(
            self.table_path,
            mode=sink.mode,
            keys=sink_keys(sink),
            sequence_by=sink.sequence_by if isinstance(sink, UpsertSink | Scd2Sink) else None,
            partition_by=list(sink.partition_by),
            app_id=self.app_id(),
            engine=self.engine,  # type: ignore[arg-type]
            table=self.table,
            unique_columns=self.unique_columns,
            one_change_per_key=self.one_change_per_key,
            **extra,
        )

    def committed(self, batch_id: int) -> bool:
        """Whether the table already has batch `batch_id` (a replay)."""
        from streams.delta import committed

        return committed(self.main(), batch_id)

    def write(
        self, df: DataFrame, batch_id: int, info: dict[str, Any], *, quarantine: bool = False
    ) -> int | None:
        """Write `df` as this batch's commit to the table (or its quarantine table); the new
        version, or None when the batch was already committed."""
        from streams.delta import write_batch

        target = self.quarantine() if quarantine else self.main()
        return write_batch(df, batch_id, target, commit_info=info)


def one_change_per_key(defn: TableDefinition, sql: str | None) -> bool:
    """Whether each batch of upsert table `defn` holds at most one row per sink key: its
    last step is an aggregate or a dedupe by some of the keys (a window's start, or end,
    standing for its window), or its SQL ends in a plain GROUP BY of columns it outputs as
    keys. A streaming aggregate emits a group once per batch; a dedupe emits a key once."""
    spec = defn.spec
    if not isinstance(spec.sink, UpsertSink):
        return False
    keys = set(spec.sink.keys)
    if spec.aggregate is not None:
        groups = set(spec.aggregate.group_by)
        window = {"window_start", "window_end"} & keys if spec.aggregate.window else set()
        return groups <= keys and (spec.aggregate.window is None or bool(window))
    if spec.dedupe is not None:
        return set(spec.dedupe.keys) <= keys
    if sql is None:
        return False
    grouped = grouped_output(sql, table=defn.name)
    return grouped is not None and grouped <= keys
