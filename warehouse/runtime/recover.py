"""`warehouse recover` and `warehouse reset`: rebuild or drop a table's position.

Recover starts a new checkpoint from the source offsets the table's own Delta
log recorded with its last batch (docs/architecture.md, "Exactly-once"). On a local
disk the old checkpoint is moved aside first and deleted only once the recovery file is
written, so a crash in between leaves either the old checkpoint or the new start
position. Object storage renames nothing whole: there the recovery file is written
first and the checkpoint deleted after, so a crash in between leaves the old checkpoint
(which the next run resumes, ignoring the file while the checkpoint has offsets) and
`warehouse recover` can be run again.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import streams.storage as storage
from warehouse.runtime.errors import RecoverError
from warehouse.runtime.locks import holding
from warehouse.spec.paths import recover_file, table_exists
from warehouse.spec.table import TableSource

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)


def _known(project: LoadedProject, table: str) -> None:
    if table not in project.tables:
        raise RecoverError(
            f"Unknown table `{table}`; the project has "
            + ", ".join(f"`{t}`" for t in sorted(project.tables))
            + ".",
            table=table,
        )


def recover(project: LoadedProject, table: str) -> dict[str, Any]:
    """Replace the checkpoint of `table` by a start position read from the table.

    Writes `<checkpoint>.recover.json` with `starting_offsets`; the next
    `warehouse run` of the table starts a new checkpoint from there (the query
    builder reads it while the checkpoint is new). Only Kafka-sourced tables
    record source offsets that a new query can start from.
    """
    _known(project, table)
    with holding(project, [table], doing="recover"):
        return _recover(project, table)


def _recover(project: LoadedProject, table: str) -> dict[str, Any]:
    from streams.delta import recorded_offsets

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
    offsets = recorded_offsets(path, table)
    if not offsets:
        raise RecoverError(
            f"Table `{table}`: no commit in {path} records source offsets "
            "(`warehouse.sourceOffsets`). Use `warehouse reset --table "
            f"{table} --yes` to reprocess from the configured start.",
            table=table,
        )
    data = {"table": table, "starting_offsets": offsets, "recovered_from": path}
    if storage.is_local(ckpt):
        removed = _replace_local(Path(ckpt), data)
    else:
        storage.write_text(recover_file(ckpt), json.dumps(data, indent=2))
        removed = storage.remove(ckpt)
    logger.info("table %s: checkpoint %s replaced; next run starts at %s", table, ckpt, offsets)
    return {**data, "checkpoint": ckpt, "old_checkpoint_removed": removed}


def _replace_local(ckpt: Path, data: dict[str, Any]) -> bool:
    """Move the checkpoint aside, write the recovery file, delete the old checkpoint;
    whether there was one."""
    moved = None
    if ckpt.exists():
        moved = ckpt.with_name(f"{ckpt.name}.old-{int(time.time() * 1000)}")
        ckpt.rename(moved)
    storage.write_text(recover_file(ckpt), json.dumps(data, indent=2))
    if moved is not None:
        shutil.rmtree(moved)
    return moved is not None


def reset(project: LoadedProject, table: str) -> list[str]:
    """Delete the table, its quarantine, its tombstones and its checkpoint; returns what
    was removed."""
    _known(project, table)
    with holding(project, [table], doing="reset"):
        return _reset(project, table)


def _reset(project: LoadedProject, table: str) -> list[str]:
    from streams.delta import tombstone_path  # imports pyspark: only when resetting

    ckpt = project.checkpoint_path(table)
    removed = [
        p
        for p in (
            project.table_path(table),
            project.quarantine_path(table),
            tombstone_path(project.table_path(table)),
            ckpt,
            recover_file(ckpt),
        )
        if storage.remove(p)
    ]
    logger.info("table %s: reset, removed %s", table, removed)
    return removed
