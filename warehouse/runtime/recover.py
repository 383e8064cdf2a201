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

The rebuilt checkpoint is written beside the old one and renamed into place; the old one
is moved aside first and deleted last, so a crash leaves the old checkpoint, the new
one, or none (which the next run refuses, naming `warehouse recover` again).
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.runtime.errors import RecoverError
from warehouse.runtime.locks import holding
from warehouse.spec.paths import table_exists
from warehouse.spec.table import TableSource, TopicSource

if TYPE_CHECKING:
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
    path = str(project.table_path(table))
    ckpt = Path(project.checkpoint_path(table))
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
    fresh = ckpt.with_name(f"{ckpt.name}{_ASIDE[1]}{int(time.time() * 1000)}")
    write_replay_checkpoint(
        fresh,
        query_id=query_id,
        batch_id=batch_id,
        start=batch.start if replay else None,
        end=batch.end,
        committed=not replay,
        settings_from=ckpt if ckpt.is_dir() else None,
    )
    if replay and batch_id == 0:
        from streams.kafka import record_initial_offsets

        assert isinstance(src, TopicSource) and batch.start is not None
        k = src.kafka
        record_initial_offsets(fresh, batch.start, topics=k.topic_list or None, pattern=k.pattern)
    moved = None
    if ckpt.exists():
        moved = ckpt.with_name(f"{ckpt.name}{_ASIDE[0]}{int(time.time() * 1000)}")
        ckpt.rename(moved)
    fresh.rename(ckpt)
    if moved is not None:
        shutil.rmtree(moved)
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
        "checkpoint": str(ckpt),
        "recovered_from": path,
        "query_id": query_id,
        "batch_id": batch_id,
        "replays": replay,
        "starting_offsets": batch.start if replay else batch.end,
        "ending_offsets": batch.end,
        "old_checkpoint_removed": moved is not None,
    }


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


def _remove_aside(ckpt: Path) -> None:
    """Delete what an interrupted recover left beside the checkpoint."""
    for suffix in _ASIDE:
        for left in ckpt.parent.glob(f"{ckpt.name}{suffix}*"):
            shutil.rmtree(left, ignore_errors=True)


def reset(project: LoadedProject, table: str) -> list[str]:
    """Delete the table's checkpoint, then its tombstones, its quarantine and the table
    itself; returns what was removed.

    The checkpoint goes first: a reset cut short leaves a new checkpoint over what is left
    of the table, which the next run refuses (naming `reset`), never an old checkpoint
    over an empty table, which would go on from the old position and lose everything
    before it. Each table is renamed aside before it is deleted, so it is there whole or
    not at all."""
    _known(project, table)
    with holding(project, [table], doing="reset"):
        return _reset(project, table)


def _reset(project: LoadedProject, table: str) -> list[str]:
    from streams.delta import crash_point, tombstone_path  # imports pyspark: only here

    removed = []
    ckpt = Path(project.checkpoint_path(table))
    _remove_aside(ckpt)
    for p in (
        ckpt,
        Path(tombstone_path(str(project.table_path(table)))),
        Path(project.quarantine_path(table)),
        Path(project.table_path(table)),
    ):
        for left in p.parent.glob(f".{p.name}{_DELETING}*"):
            shutil.rmtree(left)
        if p.is_dir():
            doomed = p.with_name(f".{p.name}{_DELETING}{int(time.time() * 1000)}")
            p.rename(doomed)
            removed.append(str(p))
            crash_point("reset")
            shutil.rmtree(doomed)
    logger.info("table %s: reset, removed %s", table, removed)
    return removed
