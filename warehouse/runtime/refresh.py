"""A full refresh: tables reset and rebuilt from their inputs (`warehouse run
--full-refresh T[,U]`, `--full-refresh-all`), with the tables that must follow them.

`refresh_selection` says which tables a run resets and which it runs; `refuse_data_loss`
refuses, before anything is deleted, a Kafka-sourced table whose topic no longer holds
the records its rows start from (retention, a deletion): rebuilding it would lose them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.compile.federation import of_cluster
from warehouse.compile.plan import ordered_names, select_tables
from warehouse.runtime.errors import DataLossRefusedError
from warehouse.runtime.recover import reset
from warehouse.spec.paths import table_exists
from warehouse.spec.table import KafkaSource, TopicSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Selection:
    """The tables a run runs (`names`, in run order) and those it resets first (`reset`)."""

    names: list[str]
    reset: list[str]


def refresh_selection(
    project: LoadedProject,
    *,
    layer: str | None = None,
    tables: Sequence[str] | None = None,
    full_refresh: Sequence[str] = (),
    full_refresh_all: bool = False,
) -> Selection:
    """What a run of `layer`/`tables` resets and runs. `full_refresh` tables (or, with
    `full_refresh_all`, every selected table) are reset with every table that reads them
    as a stream, directly or not, and all of those run. Without `layer` or `tables`, a
    full refresh runs only the tables it resets."""
    explicit = bool(tables) or layer is not None
    chosen = select_tables(project, layer=layer, tables=list(tables) if tables else None)
    roots = chosen if full_refresh_all else []
    if full_refresh:
        roots += select_tables(project, tables=list(full_refresh))
    doomed = set(roots)
    for name in roots:
        doomed.update(project.graph.stream_readers(name))
    running = doomed | (set(chosen) if explicit or not full_refresh else set())
    order = ordered_names(project)
    return Selection(
        names=[n for n in order if n in running], reset=[n for n in order if n in doomed]
    )


def refuse_data_loss(project: LoadedProject, names: Iterable[str], bootstrap: str | None) -> None:
    """Before a full refresh deletes anything: no Kafka-sourced table among `names` whose
    rows start at offsets the topic no longer holds, or that its `starting_offsets` would
    not read again (`latest`): every such partition is named with both offsets.
    `bootstrap`: the default cluster's, as resolved (None when no table reads it)."""
    from streams.delta import first_recorded_start
    from streams.kafka import log_offsets

    problems: list[tuple[str, str]] = []
    for name in names:
        src = project.tables[name].spec.source
        path = project.table_path(name)
        if not isinstance(src, TopicSource) or not table_exists(path):
            continue
        recorded = first_recorded_start(path, name) or {}
        kafka = project.config.kafka
        for cluster in src.kafka.cluster_list:
            # A federation's commits record offsets by cluster (`compile.federation`).
            held = of_cluster(recorded, cluster) if src.kafka.federated else recorded
            servers = kafka.bootstrap_of(cluster, bootstrap)
            if not held or servers is None:
                continue
            config = kafka.client_config(src.kafka.options, cluster=cluster)
            start, end = log_offsets(servers, list(held), client_config=config)
            on = f" on cluster `{cluster}`" if src.kafka.federated else ""
            problems += [(name, p + on) for p in _lost(src.kafka, held, start, end)]
    if not problems:
        return
    lines = [
        f"Table `{n}` ({project.tables[n].path}): a full refresh would lose rows: {p}."
        for n, p in problems
    ]
    lines.append(
        "Nothing was reset. The table keeps those rows; a rebuild from the topic cannot. "
        "Run without `--full-refresh` to keep them, or add `--allow-data-loss` to rebuild "
        "from what the topic holds now."
    )
    raise DataLossRefusedError("\n".join(lines), table=problems[0][0])


def _lost(
    kafka: KafkaSource,
    held: dict,
    start: dict[str, dict[int, int]],
    end: dict[str, dict[int, int]],
) -> list[str]:
    """The partitions whose rebuild would start after the offset the table's rows start
    at, each said with both offsets."""
    out = []
    for topic, parts in sorted(held.items()):
        for part, first in sorted(parts.items(), key=lambda kv: int(kv[0])):
            p = int(part)
            if topic not in start or p not in start[topic]:
                out.append(
                    f"topic `{topic}` partition {p} no longer exists; the table's rows start "
                    f"at offset {first}"
                )
                continue
            rebuilt = _rebuild_from(kafka, topic, p, start[topic][p], end[topic][p])
            if rebuilt > int(first):
                out.append(
                    f"topic `{topic}` partition {p}: the table's rows start at offset "
                    f"{first}, but a rebuild would read from offset {rebuilt} "
                    + (
                        f"(the log now starts at {start[topic][p]})"
                        if rebuilt == start[topic][p]
                        else f"(`starting_offsets: {json.dumps(kafka.starting_offsets)}`)"
                    )
                )
    return out


def _rebuild_from(kafka: KafkaSource, topic: str, partition: int, low: int, high: int) -> int:
    """The offset a new checkpoint reads `topic`'s partition from: `starting_offsets`
    (Spark's -2 earliest, -1 latest in explicit offsets), never below the log's start."""
    wanted = kafka.starting_offsets
    if wanted == "earliest":
        return low
    if wanted == "latest":
        return high
    value = wanted.get(topic, {}).get(str(partition), -2)
    if value == -1:
        return high
    return max(low, value) if value >= 0 else low


def reset_for_refresh(
    project: LoadedProject, names: Iterable[str], *, spark: SparkSession | None = None
) -> list[str]:
    """Reset each table of `names` (table, quarantine, tombstones, checkpoint, and with
    `spark` their names in its catalog); the locations removed. The caller holds their
    locks."""
    removed: list[str] = []
    for name in names:
        gone = reset(project, name, spark=spark)
        logger.info("table %s: reset for a full refresh (%d locations)", name, len(gone))
        removed += gone
    return removed
