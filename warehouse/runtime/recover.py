"""`warehouse recover` and `warehouse reset`: rebuild or drop a table's position.

Recover starts a new checkpoint from the source offsets the table's own Delta
log recorded with its last batch (docs/architecture.md, "Exactly-once"). The old checkpoint is moved
aside first and deleted only once the recovery file is written, so a crash in
between leaves either the old checkpoint or the new start position.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    offsets = recorded_offsets(path, table)
    if not offsets:
        raise RecoverError(
            f"Table `{table}`: no commit in {path} records source offsets "
            "(`warehouse.sourceOffsets`). Use `warehouse reset --table "
            f"{table} --yes` to reprocess from the configured start.",
            table=table,
        )
    moved = None
    if ckpt.exists():
        moved = ckpt.with_name(f"{ckpt.name}.old-{int(time.time() * 1000)}")
        ckpt.rename(moved)
    marker = recover_file(ckpt)
    marker.parent.mkdir(parents=True, exist_ok=True)
    data = {"table": table, "starting_offsets": offsets, "recovered_from": path}
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(marker)
    if moved is not None:
        shutil.rmtree(moved)
    logger.info("table %s: checkpoint %s replaced; next run starts at %s", table, ckpt, offsets)
    return {**data, "checkpoint": str(ckpt), "old_checkpoint_removed": moved is not None}


def reset(project: LoadedProject, table: str) -> list[str]:
    """Delete the table, its quarantine, its tombstones and its checkpoint; returns what
    was removed."""
    _known(project, table)
    with holding(project, [table], doing="reset"):
        return _reset(project, table)


def _reset(project: LoadedProject, table: str) -> list[str]:
    from streams.delta import tombstone_path  # imports pyspark: only when resetting

    removed = []
    ckpt = Path(project.checkpoint_path(table))
    for p in (
        Path(project.table_path(table)),
        Path(project.quarantine_path(table)),
        Path(tombstone_path(str(project.table_path(table)))),
        ckpt,
        recover_file(ckpt),
    ):
        if p.is_dir():
            shutil.rmtree(p)
            removed.append(str(p))
        elif p.exists():
            p.unlink()
            removed.append(str(p))
    logger.info("table %s: reset, removed %s", table, removed)
    return removed
