"""One table compiled into a complete, typed program (docs/architecture.md, "The way of a
record").

`build_program` decides, once, everything a table does in a micro-batch: its input (a
`KafkaInput` or a `TableInput`) and the streaming DataFrame it reads, its transform,
its row expectations compiled against the rows they judge, its `Targets`, its write
strategy and its publish target. The runtime starts the program's stream as a query
and calls its strategy for each batch; a batch decides nothing of the spec again.

No Spark import at module import time: pyspark is imported inside functions.
"""

from __future__ import annotations

import getpass
import logging
import os
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.compile.errors import CompileError
from warehouse.compile.inputs import KafkaInput, TableInput, kafka_input, table_input
from warehouse.compile.operators import stateful, with_watermark
from warehouse.compile.plan import TablePlan, plan_table
from warehouse.compile.strategy import ArrowLanding, Strategy, choose_strategy
from warehouse.compile.targets import Targets
from warehouse.compile.transform import CompiledTransform
from warehouse.spec.expectations import is_row_level
from warehouse.spec.paths import QUARANTINE_SUFFIX, table_exists
from warehouse.spec.table import DEFAULT_CLUSTER, Scd2Sink, TableSource, TopicSource, sink_keys

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from streams.cdc import Publisher
    from warehouse.compile.engines import ResolvedEngines
    from warehouse.quality.rows import RowChecks
    from warehouse.spec.model import LoadedProject
    from warehouse.spec.table import TableDefinition

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublishTarget:
    """Where a table publishes its changes (table → stream): a compacted topic keyed by
    the sink keys (`streams.cdc.Publisher`)."""

    topic: str
    keys: tuple[str, ...]
    mode: str
    partitions: int
    bootstrap: str
    client_config: dict[str, str]


@dataclass(frozen=True)
class DeadLetterTarget:
    """Where a table sends its quarantined records besides its quarantine table
    (`quarantine: {kafka: {topic}}`): a topic of the source's cluster
    (`streams.cdc.DeadLetters`)."""

    topic: str
    partitions: int
    bootstrap: str
    client_config: dict[str, str]
    source_bootstrap: str
    """The cluster the table reads, where the original records are read back."""
    source_client_config: dict[str, str]


@dataclass(frozen=True, eq=False)
class TableProgram:
    """What one table does, decided when it compiles.

    `stream` is what foreachBatch receives: Kafka records for a `KafkaInput` (parsed,
    transformed and judged per batch, where bad records can go to quarantine), the
    transformed rows after the stateful operators for a `TableInput`. `transform` is
    the transform a batch applies (a Kafka input's; a table input's is in `stream`).
    `checks` are the row expectations compiled against the rows they judge (None
    without any). `views`: the temporary views the program registered (dropped when
    its query ends). `no_data_batches`: whether Spark runs a batch without new input
    when the watermark moves (`emits_without_data`). `interpreted`: whether the query
    evaluates Spark's expressions outside whole-stage code without generating code
    (`dedupes_by_watermark`, docs/decisions/0047). `waits_for_input`: whether its
    source waits in a trigger for new input, the upstream table's next commit or the
    topics' next record (`INPUT_WAIT`, `waits_for_input`); `wake_file`: the local file
    whose appearance ends that wait at once, which the query's stop creates (None where
    the source does not wait, or runs on a Connect server, where a client's file is not
    seen)."""

    plan: TablePlan
    definition: TableDefinition
    input: KafkaInput | TableInput
    stream: DataFrame
    transform: CompiledTransform | None
    checks: RowChecks | None
    targets: Targets
    strategy: Strategy
    arrow: ArrowLanding | None
    publish: PublishTarget | None
    dead_letters: DeadLetterTarget | None
    events_root: str
    events_retention: float
    """Seconds the quality events are kept (`quality.events_retention`)."""
    views: tuple[str, ...]
    no_data_batches: bool
    interpreted: bool
    waits_for_input: bool
    wake_file: str | None
    once: bool

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def reads_kafka(self) -> bool:
        return isinstance(self.input, KafkaInput)

    def new_publisher(self) -> Publisher:
        """The `Publisher` of the table's published view (`publish`, which is set): it keeps
        its Kafka clients from one batch to the next until closed."""
        from streams.cdc import Publisher

        target = self.publish
        assert target is not None
        return Publisher(
            self.plan.table_path,
            bootstrap=target.bootstrap,
            topic=target.topic,
            keys=list(target.keys),
            table=self.name,
            mode="scd2" if target.mode == "scd2" else "upsert",
            partitions=target.partitions,
            client_config=target.client_config,
        )

    def new_dead_letter_publisher(self) -> Publisher:
        """The `Publisher` of the table's dead letters (`dead_letters`, which is set): the
        quarantine table's new rows as their original records, exactly once with it."""
        from streams.cdc import DEAD_LETTER_TOPIC_CONFIG, DeadLetters, Publisher

        target = self.dead_letters
        assert target is not None
        path = self.targets.quarantine_path
        quarantine = self.name + QUARANTINE_SUFFIX
        return Publisher(
            path,
            bootstrap=target.bootstrap,
            topic=target.topic,
            keys=[],
            table=quarantine,
            partitions=target.partitions,
            client_config=target.client_config,
            feed=DeadLetters(
                path,
                self.name,
                target.topic,
                target.source_bootstrap,
                client_config=target.source_client_config,
            ),
            topic_config=DEAD_LETTER_TOPIC_CONFIG,
            missing_table="skip",
        )


def snapshot_tables(project: LoadedProject, table: str) -> list[str]:
    """The tables `table`'s SQL reads as snapshots (besides its source and join streams);
    each must have a Delta table already."""
    defn = project.tables[table]
    upstreams = defn.spec.source.upstream_tables
    names = [t for t in defn.static_tables if t in project.tables and t not in upstreams]
    for name in names:
        path = project.table_path(name)
        if not table_exists(path):
            raise CompileError(
                f"Table `{table}`: its SQL reads `{name}` as a snapshot, but `{name}` has no "
                f"Delta table yet at {path}. Run `{name}` first (`warehouse run --table {name} --once`).",
                table=table,
            )
    return names


def build_program(
    project: LoadedProject,
    table: str,
    spark: SparkSession,
    *,
    engines: ResolvedEngines,
    once: bool,
    bootstrap: str | None = None,
    snapshots: Mapping[str, DataFrame] | None = None,
) -> TableProgram:
    """Compile `table` for `spark`: its stream, transform, checks, targets and strategy.

    `engines`: the run's resolved engines. `bootstrap`: the resolved Kafka bootstrap
    (needed by a Kafka-sourced or publishing table; `embedded` resolved by the caller).
    `snapshots`: frames to read the tables the SQL names as snapshots from (the runtime's
    kept copies, `snapshots: {max_age}`); the others are read at their newest version.
    """
    defn = project.tables[table]
    spec = defn.spec
    static = snapshot_tables(project, table)
    plan = plan_table(project, table, static_tables=static)
    registered: list[str] = []
    views: dict[str, str] = {}
    for name in static:
        view = f"snap_{name}_{uuid.uuid4().hex[:8]}"
        frame = (snapshots or {}).get(name)
        if frame is None:
            frame = engines.delta.read_snapshot(spark, str(project.table_path(name)))
        frame.createOrReplaceTempView(view)
        views[name] = view
        registered.append(view)
    transform = CompiledTransform(project, defn, views) if _has_transform(defn) else None
    src = spec.source
    source: KafkaInput | TableInput
    if isinstance(src, TopicSource):
        source = kafka_input(project, defn, src.kafka, bootstrap)
        waits = waits_for_input(source, engines, defn, plan, once=once)
        wake = wake_file(spark, table) if waits else None
        stream = source.stream(
            spark,
            engines,
            checkpoint=plan.checkpoint_path,
            record_wait=input_wait(waits, wake),
            wake_file=wake,
        )
        rows = _kafka_rows(source, stream, transform, defn)
        batch_transform = transform
        no_data = False  # a Kafka-sourced query runs no batch without new records
    else:
        source = table_input(project, src)
        waits = waits_for_input(source, engines, defn, plan, once=once)
        wake = wake_file(spark, table) if waits else None
        static_views = len(registered)

        def build(waits: bool, wake: str | None) -> DataFrame:
            return _table_stream(
                source,
                spark,
                engines,
                defn,
                transform,
                views,
                registered,
                commit_wait=input_wait(waits, wake),
                wake_file=wake,
            )

        stream = build(waits, wake)
        no_data = emits_without_data(stream, defn, plan.output_mode)
        if waits and no_data:
            # A join of streams that emits the rows its watermark leaves unmatched does so
            # in batches of no data, which come after a trigger that found nothing: a
            # waiting source would hold them back. Built again without the wait.
            for view in registered[static_views:]:
                spark.catalog.dropTempView(view)
            del registered[static_views:]
            waits, wake = False, None
            stream = build(waits, wake)
        rows = stream.schema
        batch_transform = None
    dead_letters = dead_letter_target(project, defn, bootstrap)
    if dead_letters is not None and isinstance(source, KafkaInput):
        _check_coordinates_kept(defn, rows)
    targets = Targets.of_table(project, table, engine=engines.delta.name)
    strategy, arrow = choose_strategy(
        defn, source, engines, spark=spark, table_path=plan.table_path
    )
    logger.debug("table %s: compiled (%s, %s write)", table, engines, strategy)
    return TableProgram(
        plan=plan,
        definition=defn,
        input=source,
        stream=stream,
        transform=batch_transform,
        checks=_compiled_checks(defn, rows),
        targets=targets,
        strategy=strategy,
        arrow=arrow,
        publish=publish_target(project, defn, bootstrap),
        dead_letters=dead_letters,
        events_root=str(project.root),
        events_retention=project.config.quality.events_retention_seconds,
        views=tuple(registered),
        no_data_batches=no_data,
        interpreted=isinstance(source, TableInput) and dedupes_by_watermark(stream, defn),
        waits_for_input=waits,
        wake_file=wake,
        once=once,
    )


INPUT_WAIT = 60.0
"""Seconds a continuous query's trigger that found nothing new waits for new input, where
its source can (`waits_for_input`), and the query's stop can end the wait (`wake_file`):
an idle query's triggers come this far apart (docs/decisions/0072, 0079, 0082)."""

UNWOKEN_INPUT_WAIT = 1.0
"""The same wait where no stop can end it (a Connect server's source): a stop waits for
the trigger, so at most this long more."""


def input_wait(waits: bool, wake: str | None) -> float:
    """Seconds the query's trigger waits for new input (0: it does not wait)."""
    if not waits:
        return 0.0
    return INPUT_WAIT if wake is not None else UNWOKEN_INPUT_WAIT


def wake_file(spark: SparkSession, table: str) -> str | None:
    """A new path for the file that ends `table`'s waiting trigger when its query stops,
    in a folder of this user's under the temporary directory (made here: the source
    watches it); None on a Connect session, whose sources run on the server's host."""
    from streams.sessions import is_connect

    if is_connect(spark):
        return None
    user = os.getuid() if hasattr(os, "getuid") else getpass.getuser()
    folder = os.path.join(tempfile.gettempdir(), f"warehouse-wake-{user}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"{table}-{uuid.uuid4().hex}")


def waits_for_input(
    source: KafkaInput | TableInput,
    engines: ResolvedEngines,
    defn: TableDefinition,
    plan: TablePlan,
    *,
    once: bool,
) -> bool:
    """Whether the table's query waits in its source for new input (the upstream table's
    next commit, the topics' next record): a continuous query on an engine whose source
    can (`DeltaEngine.waits_for_commits`, `KafkaEngine.waits_for_records`), without a
    trigger interval of its own (the table asked for that cadence), and that emits nothing
    without new input (an appended window aggregate emits its windows in batches of no
    data, which a waiting source would hold back; so does an outer or anti join of
    streams, which `build_program` finds in the plan). A query that joins tables as
    streams waits in its own table's source for a commit of any of them (each must be
    one its engine can wait for: `watch_also`); one that reads topics of several clusters
    does not wait (each cluster's source would wait in turn and hold back the other's
    records)."""
    spec = defn.spec
    if once or (spec.trigger is not None and spec.trigger.interval):
        return False
    if plan.output_mode == "append" and spec.aggregate:
        return False
    if isinstance(source, KafkaInput):
        return not source.federation and engines.kafka.waits_for_records
    paths = [source.path, *source.join_paths.values()]
    return all(engines.delta.waits_for_commits(p) for p in paths)


def _has_transform(defn: TableDefinition) -> bool:
    return defn.spec.transform is not None or defn.sql is not None


def _table_stream(
    source: TableInput,
    spark: SparkSession,
    engines: ResolvedEngines,
    defn: TableDefinition,
    transform: CompiledTransform | None,
    views: dict[str, str],
    registered: list[str],
    *,
    commit_wait: float,
    wake_file: str | None,
) -> DataFrame:
    """The table input's stream through the watermark, the transform (with the joined
    streams registered as views) and the stateful operators."""
    spec = defn.spec
    upstream = source.stream(spark, engines, commit_wait=commit_wait, wake_file=wake_file)
    wm_first = bool(spec.watermark and spec.watermark.column in upstream.columns)
    if wm_first:
        upstream = with_watermark(upstream, defn)
    for name, js in source.joined(spark, engines).items():
        view = f"stream_{name}_{uuid.uuid4().hex[:8]}"
        js.createOrReplaceTempView(view)
        views[name] = view
        registered.append(view)
    out = upstream if transform is None else transform.apply(upstream, registered=registered)
    return stateful(out, defn, watermark_done=wm_first)


def _kafka_rows(
    source: KafkaInput,
    stream: DataFrame,
    transform: CompiledTransform | None,
    defn: TableDefinition,
) -> StructType | None:
    """The schema of the rows a Kafka batch's checks judge: the parse's good rows, through
    the transform when the table has one (applied to an empty frame of those rows: Spark
    analysis, no job). None when the table has no row-level expectation."""
    if not any(is_row_level(e) for e in defn.spec.expectations):
        return None
    rows = source.parse(stream).good.schema
    if transform is None:
        return rows
    spark = stream.sparkSession
    registered: list[str] = []
    try:
        return transform.apply(spark.createDataFrame([], rows), registered=registered).schema
    finally:
        for view in registered:
            spark.catalog.dropTempView(view)


def _compiled_checks(defn: TableDefinition, rows: StructType | None) -> RowChecks | None:
    """The table's row-level expectations compiled against `rows`, or None without any."""
    if rows is None or not any(is_row_level(e) for e in defn.spec.expectations):
        return None
    from warehouse.quality.rows import compile_row_checks

    checks = compile_row_checks(defn.spec.expectations, rows, table=defn.name)
    return None if checks.empty else checks


def publish_target(
    project: LoadedProject, defn: TableDefinition, bootstrap: str | None
) -> PublishTarget | None:
    """Where `defn` publishes its changes, or None when it publishes nothing."""
    publish = defn.spec.publish
    if publish is None:
        return None
    kafka = project.config.kafka
    bootstrap = kafka.bootstrap_of(publish.kafka.cluster, bootstrap)
    if not bootstrap:
        raise CompileError(
            f"Table `{defn.name}` publishes to the topic `{publish.kafka.topic}`, but no "
            "Kafka bootstrap was resolved. Set `kafka.bootstrap` in conf/<env>.yml "
            "(`embedded` starts the bundled broker), or pass `bootstrap=` to the `Pipeline`.",
            table=defn.name,
        )
    return PublishTarget(
        topic=publish.kafka.topic,
        keys=tuple(sink_keys(defn.spec.sink)),
        mode="scd2" if isinstance(defn.spec.sink, Scd2Sink) else "upsert",
        partitions=publish.kafka.partitions,
        bootstrap=bootstrap,
        client_config=kafka.client_config(cluster=publish.kafka.cluster),
    )


def dead_letter_target(
    project: LoadedProject, defn: TableDefinition, bootstrap: str | None
) -> DeadLetterTarget | None:
    """Where `defn` sends its quarantined records, or None when only to its quarantine
    table. The topic is on the cluster the table reads unless it names its own `cluster`
    (the project's checks allow it on Kafka-sourced tables only); the original records
    are read back from the cluster the table reads."""
    quarantine = defn.spec.quarantine
    cluster = defn.dead_letter_cluster
    if quarantine is None or cluster is None:
        return None
    kafka = project.config.kafka
    source = defn.source_cluster or DEFAULT_CLUSTER
    source_bootstrap = kafka.bootstrap_of(source, bootstrap)
    bootstrap = kafka.bootstrap_of(cluster, bootstrap)
    if not bootstrap or not source_bootstrap:
        raise CompileError(
            f"Table `{defn.name}` sends dead letters to the topic "
            f"`{quarantine.kafka.topic}`, but no Kafka bootstrap was resolved. Set "
            "`kafka.bootstrap` in conf/<env>.yml, or pass `bootstrap=` to the `Pipeline`.",
            table=defn.name,
        )
    return DeadLetterTarget(
        topic=quarantine.kafka.topic,
        partitions=quarantine.kafka.partitions,
        bootstrap=bootstrap,
        client_config=kafka.client_config(cluster=cluster),
        source_bootstrap=source_bootstrap,
        source_client_config=kafka.client_config(cluster=source),
    )


def _check_coordinates_kept(defn: TableDefinition, rows: StructType | None) -> None:
    """A table with dead letters whose `quarantine` expectations judge rows (`rows`, after
    the transform) without the Kafka coordinates could not name their original records."""
    if rows is None or not any(e.on_violation == "quarantine" for e in defn.spec.expectations):
        return
    missing = [c for c in ("_topic", "_partition", "_offset") if c not in rows.fieldNames()]
    quarantine = defn.spec.quarantine
    if missing and quarantine is not None:
        raise CompileError(
            f"Table `{defn.name}` sends dead letters to `{quarantine.kafka.topic}`, but the "
            "rows its expectations quarantine lack "
            f"{', '.join(f'`{c}`' for c in missing)}, which name each one's original record. "
            "Keep them in the table's SELECT (`SELECT *, ...` or list them).",
            table=defn.name,
        )


def emits_without_data(df: DataFrame, defn: TableDefinition, output_mode: str) -> bool:
    """Whether a batch without input can emit rows for this query, so Spark must run one
    when the watermark moves: append output with an aggregate (a window the watermark
    closed), state with timeouts, or an outer or anti join of streams (`join_streams`:
    the rows the watermark leaves unmatched; a join with a snapshot keeps no state). An
    inner join of streams emits only when a new row meets a kept one. A plan Spark does
    not let us inspect counts as emitting.

    Any other query runs without such batches: each would be a whole extra micro-batch
    (jobs, a Delta read, our writer) after each one with data; eviction then happens in
    the next batch with data."""
    if output_mode != "append":
        return False
    if defn.spec.aggregate:
        return True
    plan = analyzed_plan(df)
    if plan is None:  # Spark Connect has no JVM plan: keep Spark's default
        return True
    joins = isinstance(defn.spec.source, TableSource) and defn.spec.source.join_streams
    nodes = _STATE_EMITS + (_JOIN_EMITS if joins else ())
    return any(node in plan for node in nodes)


def analyzed_plan(df: DataFrame) -> str | None:
    """The analyzed plan of `df` as Spark prints it (no public API gives it), or None
    where there is no JVM plan to ask (Spark Connect)."""
    try:
        return df._jdf.queryExecution().analyzed().toString()
    except Exception:  # noqa: BLE001 - a Connect DataFrame has no `_jdf`
        return None


def dedupes_by_watermark(df: DataFrame, defn: TableDefinition) -> bool:
    """Whether the stream's only state is a dedupe that a watermark evicts: a watermark
    and a dedupe, no aggregate, no join of streams.

    Each batch, the dedupe builds its predicates that evict state and drop late rows
    with the batch's watermark written into them as a literal, and Spark generates and
    compiles a class for each new literal: two a batch that moves the watermark, each
    compiled by janino and then by the JIT. Interpreted, a dedupe's large batch costs
    about as much; an aggregate's costs 2.3 times as much, so an aggregate or a join of
    streams keeps generated code (docs/decisions/0047). A plan Spark does not let us
    inspect counts as not deduping: Spark's defaults stay."""
    joins = isinstance(defn.spec.source, TableSource) and defn.spec.source.join_streams
    if not defn.spec.watermark or not defn.spec.dedupe or defn.spec.aggregate or joins:
        return False
    plan = analyzed_plan(df)
    if plan is None:  # Spark Connect has no JVM plan: keep Spark's default
        return False
    return "EventTimeWatermark" in plan and "Deduplicate" in plan and "Aggregate" not in plan


# Nodes of an analyzed plan, as Spark prints them, whose state can emit rows when the
# watermark or a timeout evicts it.
_STATE_EMITS = (
    "Aggregate",
    "FlatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState",
    "TransformWithState",
)
_JOIN_EMITS = ("Join LeftOuter", "Join RightOuter", "Join FullOuter", "Join LeftAnti")
