"""`warehouse recover` and `warehouse reset`: rebuild or drop a table's position.

Recover rebuilds the checkpoint of a Kafka-sourced table from its own Delta log
(docs/architecture.md, "Exactly-once"): the newest commit recorded the writer's app id
(`<table>:<query id>`), its batch `b` and the offsets `b` started from and ended at. The
new checkpoint keeps that query id and has batch `b` planned, `[start, end)`, and not
committed, as Spark leaves a checkpoint after a crash between the batch's table commit
and its commit log. The next run replays `b`: the table's guard skips the commit it has,
and what `b` had not finished (its quarantine, its quality events, its publish) is
written under the same app id, each with its own guard, so nothing is lost or written
twice. Then the query goes on from `end`.

On a local disk the rebuilt checkpoint is written beside the old one and renamed into
place; the old one is moved aside first and deleted last, so a crash leaves the old
checkpoint, the new one, or none (which the next run refuses, naming `warehouse recover`
again). Object storage renames nothing whole: there a marker `<checkpoint>.recovering`
is written first and deleted last, the old checkpoint deleted and the rebuilt one copied
into its place in between; a run refuses a checkpoint with the marker
(`refuse_interrupted_recover`), naming `warehouse recover`, which starts over.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import streams.storage as storage
from warehouse.compile.federation import as_sources
from warehouse.runtime.errors import RecoverError
from warehouse.runtime.locks import holding
from warehouse.spec.paths import fingerprint_file, recovering_file, table_exists
from warehouse.spec.table import TableSource, TopicSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streams.delta import RecordedBatch
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)

_ASIDE = (".old-", ".recovering-")
"""Suffixes of the checkpoints a recover moves aside or writes before its rename."""
_DELETING = ".deleting-"
"""What a reset renames a folder to (hidden: `.<name>.deleting-<ms>`) before deleting it."""


def _known(project: LoadedProject, table: str) -> None:
    if table not in project.tables:
        raise RecoverError(
            f"Unknown table `{table}`; the project has "
            + ", ".join(f"`{t}`" for t in sorted(project.tables))
            + ".",
            table=table,
        )


def recover(project: LoadedProject, table: str) -> dict[str, Any]:
    """Replace the checkpoint of `table` by one rebuilt from the table's newest batch
    commit, which the next `warehouse run` replays and goes on from. Only Kafka-sourced
    tables record source offsets a checkpoint can be rebuilt from."""
    _known(project, table)
    with holding(project, [table], doing="recover"):
        return _recover(project, table)


def _recover(project: LoadedProject, table: str) -> dict[str, Any]:
    from streams.delta import recorded_batch, write_replay_checkpoint

    defn = project.tables[table]
    path = project.table_path(table)
    ckpt = project.checkpoint_path(table)
    src = defn.spec.source
    if isinstance(src, TableSource):
        raise RecoverError(
            f"Table `{table}` reads the table `{src.table}`, not Kafka; its "
            "checkpoint cannot be rebuilt from recorded offsets. Use "
            f"`warehouse reset --table {table} --yes` and run it again to reprocess.",
            table=table,
        )
    if not table_exists(path):
        raise RecoverError(
            f"Table `{table}` has no Delta table at {path}, so there is nothing to recover "
            f"from. Run it (`warehouse run --table {table} --once`).",
            table=table,
        )
    batch = recorded_batch(path, table)
    if batch is None:
        raise RecoverError(
            f"Table `{table}`: no commit in {path} records source offsets "
            "(`warehouse.sourceOffsets`). Use `warehouse reset --table "
            f"{table} --yes` to reprocess from the configured start.",
            table=table,
        )
    _remove_aside(ckpt)
    query_id, batch_id, replay = _position(table, batch)
    clusters = src.kafka.cluster_list if src.kafka.federated else None
    start, end = batch.start, batch.end
    if clusters is not None:
        start, end = as_sources(start, clusters), as_sources(end, clusters)
        if end is None:
            raise RecoverError(
                f"Table `{table}` reads the clusters {', '.join(f'`{c}`' for c in clusters)}, "
                f"but its newest commit in {path} records no offsets for some of them "
                f"(`{batch.end}`): it was written with other clusters. Use `warehouse reset "
                f"--table {table} --yes` to reprocess from the configured start.",
                table=table,
            )
        replay = replay and start is not None
    fresh = f"{ckpt}{_ASIDE[1]}{int(time.time() * 1000)}"
    old = storage.is_dir(ckpt)
    write_replay_checkpoint(
        fresh,
        query_id=query_id,
        batch_id=batch_id,
        start=start if replay else None,
        end=end,
        committed=not replay,
        settings_from=ckpt if old else None,
        settings=_SHUFFLE_DEFAULT | _shuffle(project),
    )
    if replay and batch_id == 0:
        from streams.kafka import record_initial_offsets

        assert isinstance(src, TopicSource) and start is not None
        k = src.kafka
        topics = k.topic_list or None
        if clusters is None:
            record_initial_offsets(fresh, start, topics=topics, pattern=k.pattern)
        for index, cluster in enumerate(clusters or []):
            offsets = start["sources"][index]
            record_initial_offsets(
                fresh, offsets, topics=topics, pattern=k.pattern, cluster=cluster, index=index
            )
    # The table is built from what it was: the plan goes on comparing with that.
    recorded = storage.read_bytes(fingerprint_file(ckpt)) if old else None
    if recorded is not None:
        storage.write_bytes(fingerprint_file(fresh), recorded)
    if storage.is_local(ckpt):
        _swap_local(fresh, ckpt)
    else:
        _swap_copying(fresh, ckpt)
    logger.info(
        "table %s: checkpoint %s rebuilt for query %s: %s batch %d, then on from %s",
        table,
        ckpt,
        query_id,
        "replays" if replay else "resumes after",
        batch_id,
        batch.end,
    )
    return {
        "table": table,
        "checkpoint": ckpt,
        "recovered_from": path,
        "query_id": query_id,
        "batch_id": batch_id,
        "replays": replay,
        "starting_offsets": batch.start if replay else batch.end,
        "ending_offsets": batch.end,
        "old_checkpoint_removed": old,
    }


_SHUFFLE = "spark.sql.shuffle.partitions"
_SHUFFLE_DEFAULT = {_SHUFFLE: "200"}
"""Spark's own default, for a project whose `spark.conf` does not set it."""


def _shuffle(project: LoadedProject) -> dict[str, str]:
    """The shuffle partitions the project's sessions run with, which a checkpoint rebuilt
    without the old one records (`write_replay_checkpoint`'s `settings`)."""
    value = project.config.spark.conf.get(_SHUFFLE)
    return {} if value is None else {_SHUFFLE: str(value)}


def _position(table: str, batch: RecordedBatch) -> tuple[str, int, bool]:
    """The rebuilt checkpoint's query id, its last batch and whether the run replays it.

    The newest batch is replayed under its own app id when its commit recorded both the
    writer and where the batch started. A commit without them (written by an older
    version of the framework) gives the position only: the checkpoint resumes after it
    under a new query id, and the newest batch's quarantine rows, if its crash lost
    them, are not written again."""
    prefix = f"{table}:"
    app_id = batch.app_id or ""
    if app_id.startswith(prefix) and batch.batch_id is not None:
        replay = batch.start is not None
        return app_id.removeprefix(prefix), batch.batch_id, replay
    logger.warning(
        "table %s: its newest commit records no writer and batch (`%s`); the rebuilt "
        "checkpoint goes on after it without replaying it",
        table,
        app_id,
    )
    return str(uuid.uuid4()), 0, False


def _swap_local(fresh: str, ckpt: str) -> None:
    """Put the checkpoint `fresh` in the place of `ckpt` by renames: the old one is moved
    aside first and deleted last."""
    moved = None
    if os.path.exists(ckpt):
        moved = f"{ckpt}{_ASIDE[0]}{int(time.time() * 1000)}"
        os.rename(ckpt, moved)
    os.rename(fresh, ckpt)
    if moved is not None:
        shutil.rmtree(moved)


def _swap_copying(fresh: str, ckpt: str) -> None:
    """Put the checkpoint `fresh` in the place of `ckpt` on object storage, which renames
    nothing whole: between the marker's write and its delete, a run refuses the
    checkpoint (`refuse_interrupted_recover`)."""
    from streams.delta import crash_point

    marker = recovering_file(ckpt)
    storage.write_text(marker, f"warehouse recover: {fresh}\n")
    storage.remove(ckpt)
    crash_point("recover")
    for rel in sorted(storage.walk_files(fresh)):
        data = storage.read_bytes(storage.join(fresh, rel))
        assert data is not None, rel
        storage.write_bytes(storage.join(ckpt, rel), data)
    storage.remove(fresh)
    storage.remove(marker)


def _remove_aside(ckpt: str) -> None:
    """Delete what an interrupted recover left beside the checkpoint."""
    folder, name = storage.parent(ckpt), storage.name(ckpt)
    for left in storage.list_names(folder):
        if any(left.startswith(f"{name}{suffix}") for suffix in _ASIDE):
            storage.remove(storage.join(folder, left))


def reset(project: LoadedProject, table: str, *, spark: SparkSession | None = None) -> list[str]:
    """Delete the table's checkpoint, then its tombstones, its quarantine and the table
    itself; returns what was removed. With `spark`, the table's and its quarantine's names
    in that session's catalog (`catalog:`) are dropped first (and returned first), so no
    name outlives its data.

    The checkpoint goes first: a reset cut short leaves a new checkpoint over what is left
    of the table, which the next run refuses (naming `reset`), never an old checkpoint
    over an empty table, which would go on from the old position and lose everything
    before it. Each table is renamed aside before it is deleted, so it is there whole or
    not at all."""
    _known(project, table)
    with holding(project, [table], doing="reset"):
        dropped = []
        if spark is not None:
            from warehouse.runtime.catalog import require_metastore, unregister

            require_metastore(spark, project)
            dropped = unregister(spark, project, table)
        return [*dropped, *_reset(project, table)]


def _reset(project: LoadedProject, table: str) -> list[str]:
    from streams.delta import crash_point, tombstone_path  # imports pyspark: only here

    removed = []
    ckpt = project.checkpoint_path(table)
    _remove_aside(ckpt)
    for p in (
        ckpt,
        tombstone_path(project.table_path(table)),
        project.quarantine_path(table),
        project.table_path(table),
    ):
        if _remove_whole(p, crash_point):
            removed.append(p)
    storage.remove(recovering_file(ckpt))
    logger.info("table %s: reset, removed %s", table, removed)
    return removed


def _remove_whole(location: str, crash_point: Callable[[str], None]) -> bool:
    """Delete the folder at `location`; whether there was one. On a local disk it is
    renamed aside (hidden: `.<name>.deleting-<ms>`) first, so it is there whole or not at
    all; object storage deletes object by object, and a reset cut short is run again."""
    local = storage.local_path(location)
    if local is None:
        return storage.remove(location)
    parent, name = os.path.split(local)
    for left in os.listdir(parent) if os.path.isdir(parent) else []:
        if left.startswith(f".{name}{_DELETING}"):
            shutil.rmtree(os.path.join(parent, left))
    if not os.path.isdir(local):
        return False
    doomed = os.path.join(parent, f".{name}{_DELETING}{int(time.time() * 1000)}")
    os.rename(local, doomed)
    crash_point("reset")
    shutil.rmtree(doomed)
    return True
